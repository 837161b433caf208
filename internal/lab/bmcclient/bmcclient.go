// Package bmcclient is labctl's side of the lab's BMCs: the few Redfish
// calls an installer makes (a System's power and boot override, its
// virtual CD), sent from the lab's network namespace, where the nodes reach
// their BMCs, with the lab's BMC user. WaitAnswer is the bmcs step's check
// that every node's BMC answers; the agent mode boots its nodes through
// BootFromISO and Eject.
//
// What it does not do: serve BMCs (vbmcd) or know the installer's flow.
package bmcclient

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/bmlab/bmlab/internal/netplumb"
	"github.com/bmlab/bmlab/internal/plan"
)

// MediaWait bounds how long a BMC may take to fetch an image.
var MediaWait = 15 * time.Minute

// HTTP is an HTTP client whose sockets live in the lab's network
// namespace: it reaches the BMCs where the nodes reach them.
func HTTP(p *plan.Plan) *http.Client {
	return &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		DialContext:     netplumb.DialContextIn(p.Netns),
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // vbmcd's own self-signed certificate
	}}
}

// Client sends Redfish requests to the lab's BMCs as the lab's BMC user.
type Client struct {
	hc         *http.Client
	user, pass string
}

// New is a Client for the plan's BMCs.
func New(p *plan.Plan) *Client {
	return &Client{hc: HTTP(p), user: p.BMC.Username, pass: p.BMC.Password}
}

// do sends one request; out (may be nil) receives a JSON answer. An answer
// other than 2xx is an error with the BMC's message.
func (c *Client) do(ctx context.Context, method, url string, body, out any) (*http.Response, error) {
	var r io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		r = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, r)
	if err != nil {
		return nil, err
	}
	req.SetBasicAuth(c.user, c.pass)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", method, url, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return resp, fmt.Errorf("%s %s: %w", method, url, err)
	}
	if resp.StatusCode/100 != 2 {
		return resp, fmt.Errorf("%s %s: %s: %s", method, url, resp.Status, redfishMessage(data))
	}
	if out != nil && len(data) > 0 {
		if err := json.Unmarshal(data, out); err != nil {
			return resp, fmt.Errorf("%s %s: %w", method, url, err)
		}
	}
	return resp, nil
}

// redfishMessage is the first message of a Redfish error body.
func redfishMessage(body []byte) string {
	var e struct {
		Error struct {
			Message  string `json:"message"`
			Extended []struct {
				Message string `json:"Message"`
			} `json:"@Message.ExtendedInfo"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &e) == nil {
		if len(e.Error.Extended) > 0 {
			return e.Error.Extended[0].Message
		}
		if e.Error.Message != "" {
			return e.Error.Message
		}
	}
	return strings.TrimSpace(string(body))
}

// virtualMedia is what labctl reads of a VirtualMedia member.
type virtualMedia struct {
	ID         string   `json:"@odata.id"`
	MediaTypes []string `json:"MediaTypes"`
	Image      string   `json:"Image"`
	Inserted   bool     `json:"Inserted"`
}

// cdDrive finds the system's virtual CD (the member whose media types
// include CD or DVD).
func (c *Client) cdDrive(ctx context.Context, systemURL string) (string, virtualMedia, error) {
	var coll struct {
		Members []struct {
			ID string `json:"@odata.id"`
		} `json:"Members"`
	}
	if _, err := c.do(ctx, http.MethodGet, systemURL+"/VirtualMedia", nil, &coll); err != nil {
		return "", virtualMedia{}, err
	}
	root := systemURL[:strings.Index(systemURL, "/redfish/")]
	for _, m := range coll.Members {
		var vm virtualMedia
		if _, err := c.do(ctx, http.MethodGet, root+m.ID, nil, &vm); err != nil {
			return "", vm, err
		}
		for _, t := range vm.MediaTypes {
			if t == "CD" || t == "DVD" {
				return root + m.ID, vm, nil
			}
		}
	}
	return "", virtualMedia{}, fmt.Errorf("%s has no virtual CD", systemURL)
}

// system is what labctl reads of a ComputerSystem.
type system struct {
	PowerState string `json:"PowerState"`
	Boot       struct {
		Target  string `json:"BootSourceOverrideTarget"`
		Enabled string `json:"BootSourceOverrideEnabled"`
	} `json:"Boot"`
}

func (c *Client) system(ctx context.Context, url string) (system, error) {
	var s system
	_, err := c.do(ctx, http.MethodGet, url, nil, &s)
	return s, err
}

// Eject ejects the virtual CD of the system at sys, when it holds media.
func (c *Client) Eject(ctx context.Context, sys string) error {
	cd, vm, err := c.cdDrive(ctx, sys)
	if err == nil && vm.Inserted {
		_, err = c.do(ctx, http.MethodPost, cd+"/Actions/VirtualMedia.EjectMedia", map[string]any{}, nil)
	}
	return err
}

// BootFromISO inserts the ISO at url into the virtual CD of the system at
// sys, waits until the BMC has it (MediaWait), sets a Once boot override to
// the CD and powers the system on (or restarts it when it runs). It
// reports whether it sent anything.
func (c *Client) BootFromISO(ctx context.Context, sys, url string) (bool, error) {
	cd, vm, err := c.cdDrive(ctx, sys)
	if err != nil {
		return false, err
	}
	if !vm.Inserted || vm.Image != url {
		if vm.Inserted {
			if _, err := c.do(ctx, http.MethodPost, cd+"/Actions/VirtualMedia.EjectMedia", map[string]any{}, nil); err != nil {
				return false, err
			}
		}
		if _, err := c.do(ctx, http.MethodPost, cd+"/Actions/VirtualMedia.InsertMedia",
			map[string]any{"Image": url, "Inserted": true, "WriteProtected": true}, nil); err != nil {
			return false, err
		}
		if err := c.waitInserted(ctx, cd, url); err != nil {
			return true, err
		}
	}
	if _, err := c.do(ctx, http.MethodPatch, sys, map[string]any{"Boot": map[string]any{
		"BootSourceOverrideTarget": "Cd", "BootSourceOverrideEnabled": "Once", "BootSourceOverrideMode": "UEFI"}}, nil); err != nil {
		return true, err
	}
	s, err := c.system(ctx, sys)
	if err != nil {
		return true, err
	}
	reset := "On"
	if s.PowerState == "On" || s.PowerState == "PoweringOn" {
		reset = "ForceRestart"
	}
	_, err = c.do(ctx, http.MethodPost, sys+"/Actions/ComputerSystem.Reset", map[string]any{"ResetType": reset}, nil)
	return true, err
}

// waitInserted waits until the BMC shows the image in the drive.
func (c *Client) waitInserted(ctx context.Context, cd, url string) error {
	deadline := time.Now().Add(MediaWait)
	for {
		var vm virtualMedia
		_, err := c.do(ctx, http.MethodGet, cd, nil, &vm)
		if err == nil && vm.Inserted && vm.Image == url {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the BMC has not attached %s after %s (last error: %v)", url, MediaWait, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// WaitAnswer waits up to wait until every node's Redfish System answers
// with its UUID at the plan's address, reached from the lab's namespace;
// progress (may be nil) hears how many answer.
func WaitAnswer(ctx context.Context, p *plan.Plan, wait time.Duration, progress func(string)) error {
	hc := HTTP(p)
	deadline := time.Now().Add(wait)
	for i, n := range p.Nodes {
		if progress != nil {
			progress(fmt.Sprintf("%d of %d BMCs answer; waiting for %s's", i, len(p.Nodes), n.Name))
		}
		for {
			status, err := probe(ctx, hc, p, n.BMC.SystemURL)
			if err == nil && status == http.StatusOK {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("the BMC of %s does not answer at %s (status %d, error %v); see %s", n.Name, n.BMC.SystemURL, status, err, p.Vbmcd.Log)
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(200 * time.Millisecond):
			}
		}
	}
	return nil
}

func probe(ctx context.Context, hc *http.Client, p *plan.Plan, url string) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	req.SetBasicAuth(p.BMC.Username, p.BMC.Password)
	resp, err := hc.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusOK {
		var b strings.Builder
		buf := make([]byte, 4096)
		for {
			k, err := resp.Body.Read(buf)
			b.Write(buf[:k])
			if err != nil {
				break
			}
		}
		id := url[strings.LastIndex(url, "/")+1:]
		if !strings.Contains(strings.ToLower(b.String()), strings.ToLower(id)) {
			return resp.StatusCode, fmt.Errorf("the System at %s is not %s", url, id)
		}
	}
	return resp.StatusCode, nil
}
