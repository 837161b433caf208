package bmcscreen

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Client reads and types on one machine's screen through its BMC's
// Redfish service: the screenshot action its Manager names (Dell's
// DellLCService.ExportServerScreenShot, else vbmcd's Bmlab.ExportScreenShot),
// vbmcd's Bmlab.SendKeys and Bmlab.ExportSerialData.
type Client struct {
	hc         *http.Client
	base       string // scheme://host
	system     string // the System's path
	user, pass string

	manager  string // the Manager's path, found once
	shot     string // the screenshot action's target
	dell     bool   // the screenshot is Dell's
	keys     string
	serial   string
	prepared bool
}

// New is a Client for the System at systemURL
// (https://HOST/redfish/v1/Systems/ID), through hc, as user.
func New(hc *http.Client, systemURL, user, pass string) (*Client, error) {
	u, err := url.Parse(systemURL)
	if err != nil || u.Host == "" || !strings.HasPrefix(u.Path, "/redfish/v1/Systems/") {
		return nil, fmt.Errorf("%q is not a Redfish System URL (https://HOST/redfish/v1/Systems/ID)", systemURL)
	}
	if hc == nil {
		hc = http.DefaultClient
	}
	return &Client{hc: hc, base: u.Scheme + "://" + u.Host, system: strings.TrimSuffix(u.Path, "/"), user: user, pass: pass}, nil
}

// Error is a BMC's refusal: the request, its status and the first message.
type Error struct {
	What    string
	Status  int
	Message string
}

func (e *Error) Error() string {
	return fmt.Sprintf("%s: %d %s: %s", e.What, e.Status, http.StatusText(e.Status), e.Message)
}

// call sends a request with a JSON body (nil: none) and decodes the
// answer's JSON into out (nil: ignored).
func (c *Client) call(ctx context.Context, method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return err
	}
	req.SetBasicAuth(c.user, c.pass)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	what := method + " " + c.base + path
	resp, err := c.hc.Do(req)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if resp.StatusCode >= 300 {
		return &Error{What: what, Status: resp.StatusCode, Message: redfishMessage(b)}
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("%s: the answer is not JSON: %w", what, err)
	}
	return nil
}

// redfishMessage is the first message of a Redfish error body, or the
// body's start.
func redfishMessage(b []byte) string {
	var e struct {
		Error struct {
			Message string
			Info    []struct{ Message string } `json:"@Message.ExtendedInfo"`
		} `json:"error"`
	}
	if json.Unmarshal(b, &e) == nil && e.Error.Message != "" {
		msg := e.Error.Message
		if len(e.Error.Info) > 0 && e.Error.Info[0].Message != "" && !strings.Contains(msg, e.Error.Info[0].Message) {
			msg += " " + e.Error.Info[0].Message
		}
		return msg
	}
	s := strings.TrimSpace(string(b))
	if len(s) > 256 {
		s = s[:256] + "…"
	}
	return s
}

type link struct {
	ID string `json:"@odata.id"`
}

type target struct {
	Target string `json:"target"`
}

// prepare finds the System's Manager and the actions it names.
func (c *Client) prepare(ctx context.Context) error {
	if c.prepared {
		return nil
	}
	var sys struct {
		Links struct{ ManagedBy []link }
	}
	if err := c.call(ctx, http.MethodGet, c.system, nil, &sys); err != nil {
		return err
	}
	if len(sys.Links.ManagedBy) == 0 {
		return fmt.Errorf("the System at %s%s names no Manager (Links.ManagedBy)", c.base, c.system)
	}
	c.manager = sys.Links.ManagedBy[0].ID
	var mgr struct {
		Links struct {
			Oem struct {
				Dell struct{ DellLCService link }
			}
		}
		Actions struct {
			Oem map[string]target
		}
	}
	if err := c.call(ctx, http.MethodGet, c.manager, nil, &mgr); err != nil {
		return err
	}
	oem := mgr.Actions.Oem
	c.keys, c.serial, c.shot = oem["#Bmlab.SendKeys"].Target, oem["#Bmlab.ExportSerialData"].Target, oem["#Bmlab.ExportScreenShot"].Target
	if lc := mgr.Links.Oem.Dell.DellLCService.ID; lc != "" {
		// Dell's own, as Dell's ExportServerScreenShotREDFISH.py finds it.
		var svc struct {
			Actions map[string]target
		}
		if err := c.call(ctx, http.MethodGet, lc, nil, &svc); err != nil {
			return err
		}
		if t := svc.Actions["#DellLCService.ExportServerScreenShot"].Target; t != "" {
			c.shot, c.dell = t, true
		}
	}
	c.prepared = true
	return nil
}

// Screenshot returns what the machine's screen shows now, as a PNG.
func (c *Client) Screenshot(ctx context.Context) ([]byte, error) {
	if err := c.prepare(ctx); err != nil {
		return nil, err
	}
	if c.shot == "" {
		return nil, fmt.Errorf("the Manager at %s%s names no screenshot action (Bmlab.ExportScreenShot or Dell's DellLCService)", c.base, c.manager)
	}
	var out struct{ ServerScreenShotFile string }
	if err := c.call(ctx, http.MethodPost, c.shot, map[string]string{"FileType": "ServerScreenShot"}, &out); err != nil {
		return nil, err
	}
	b, err := base64.StdEncoding.DecodeString(out.ServerScreenShotFile)
	if err != nil {
		return nil, fmt.Errorf("POST %s: ServerScreenShotFile is not base64: %w", c.shot, err)
	}
	return b, nil
}

// Dell reports whether the screenshot is Dell's DellLCService action.
func (c *Client) Dell(ctx context.Context) (bool, error) {
	err := c.prepare(ctx)
	return c.dell, err
}

// Type types seq on the machine's keyboard (ParseSequence's syntax:
// "root<Enter>") and returns how many keys were typed.
func (c *Client) Type(ctx context.Context, seq string) (int, error) {
	items, err := ParseSequence(seq)
	if err != nil {
		return 0, err
	}
	return c.TypeItems(ctx, items)
}

// TypeItems types items (SendKeys' Keys).
func (c *Client) TypeItems(ctx context.Context, items []Item) (int, error) {
	if err := c.prepare(ctx); err != nil {
		return 0, err
	}
	if c.keys == "" {
		return 0, fmt.Errorf("the Manager at %s%s names no Bmlab.SendKeys action", c.base, c.manager)
	}
	var out struct{ KeysTyped int }
	if err := c.call(ctx, http.MethodPost, c.keys, map[string]any{"Keys": items}, &out); err != nil {
		return 0, err
	}
	return out.KeysTyped, nil
}

// Serial returns the end of what the machine printed on its serial port
// since it started.
func (c *Client) Serial(ctx context.Context) (string, error) {
	if err := c.prepare(ctx); err != nil {
		return "", err
	}
	if c.serial == "" {
		return "", fmt.Errorf("the Manager at %s%s names no Bmlab.ExportSerialData action", c.base, c.manager)
	}
	var out struct{ SerialData string }
	if err := c.call(ctx, http.MethodPost, c.serial, map[string]any{}, &out); err != nil {
		return "", err
	}
	return out.SerialData, nil
}

// Where says where WaitFor looks.
type Where int

// Where text is looked for.
const (
	OnScreen Where = 1 << iota
	OnSerial
	Anywhere = OnScreen | OnSerial
)

// Found is where and when WaitFor found its text.
type Found struct {
	Where   Where
	After   time.Duration
	Screens int    // screenshots read by OCR
	Text    string // the screen's text (OCR) or the serial output it was found in
}

// WaitOptions tune WaitFor.
type WaitOptions struct {
	Where Where         // default Anywhere
	Every time.Duration // between looks; default 500 ms
	// Screen, when set, is given each screenshot and its text (for a
	// test to keep what it saw).
	Screen func(png []byte, text string)
}

// WaitFor looks for text on the machine's screen (by OCR, OCRText) and in
// its serial output until it appears or ctx ends, comparing as Fold does
// on the screen and Normalize in the serial output (case, spaces and line
// breaks do not count; on the screen, nor OCR's usual confusions). The
// error at the deadline holds the last screen's text and serial output's
// end.
func (c *Client) WaitFor(ctx context.Context, text string, o WaitOptions) (Found, error) {
	if o.Where == 0 {
		o.Where = Anywhere
	}
	if o.Every <= 0 {
		o.Every = 500 * time.Millisecond
	}
	want, wantFolded := Normalize(text), Fold(text)
	if want == "" {
		return Found{}, errors.New("wait for what? the text is empty")
	}
	start := time.Now()
	var lastScreen, lastSerial string
	var lastErr error
	screens := 0
	for {
		if o.Where&OnSerial != 0 {
			out, err := c.Serial(ctx)
			switch {
			case err != nil && o.Where == OnSerial:
				return Found{}, err
			case err != nil:
				o.Where &^= OnSerial // a machine without a serial log: the screen alone
				lastErr = err
			default:
				lastSerial = out
				if strings.Contains(Normalize(out), want) {
					return Found{Where: OnSerial, After: time.Since(start), Screens: screens, Text: out}, nil
				}
			}
		}
		if o.Where&OnScreen != 0 {
			png, err := c.Screenshot(ctx)
			var txt string
			if err == nil {
				txt, err = OCRText(ctx, png)
				if err == nil {
					screens++
				}
				if o.Screen != nil {
					o.Screen(png, txt)
				}
			}
			var be *Error
			switch {
			case err == nil:
				lastScreen = txt
				if strings.Contains(Fold(txt), wantFolded) {
					return Found{Where: OnScreen, After: time.Since(start), Screens: screens, Text: txt}, nil
				}
			case errors.As(err, &be) && (be.Status == http.StatusConflict || be.Status == http.StatusTooManyRequests):
				lastErr = err // off for now, or asked too often: look again
			case ctx.Err() == nil:
				return Found{}, err
			}
		}
		select {
		case <-ctx.Done():
			return Found{}, &NotFoundError{Text: text, After: time.Since(start), Screens: screens, Screen: lastScreen, Serial: tail(lastSerial, 2048), Last: lastErr}
		case <-time.After(o.Every):
		}
	}
}

// NotFoundError is WaitFor's error at its deadline.
type NotFoundError struct {
	Text           string
	After          time.Duration
	Screens        int // screenshots read by OCR to the end
	Screen, Serial string
	Last           error
}

func (e *NotFoundError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%q did not appear in %s", e.Text, e.After.Round(100*time.Millisecond))
	if e.Screens == 0 {
		b.WriteString("\nno screenshot was read to the end (an OCR takes about a second: give a longer timeout)")
	} else {
		fmt.Fprintf(&b, " (%d screenshots read)\nthe screen's last text (OCR):\n%s", e.Screens, strings.TrimSpace(e.Screen))
	}
	if e.Serial != "" {
		fmt.Fprintf(&b, "\nthe serial output's end:\n%s", strings.TrimSpace(e.Serial))
	}
	if e.Last != nil {
		fmt.Fprintf(&b, "\nlast error: %v", e.Last)
	}
	return b.String()
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[len(s)-n:]
}
