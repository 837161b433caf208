package redfish

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"image"
	"image/png"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/bmlab/bmlab/internal/accounts"
	"github.com/bmlab/bmlab/internal/machine"
	"github.com/bmlab/bmlab/internal/personality"
	"github.com/bmlab/bmlab/internal/personality/dell"
)

// The hands-free console: a machine's screen and keyboard, and its serial
// output, through its BMC's Redfish service.
//
//   - A screenshot. A Dell personality answers Dell's own action, where
//     Dell's scripts and badfish-style tools call it: GET
//     Managers/{id}/Oem/Dell/DellLCService, POST its
//     Actions/DellLCService.ExportServerScreenShot with {"FileType":
//     "ServerScreenShot" | "Preview" | "LastCrashScreenShot"}, and the
//     answer's ServerScreenShotFile is a base64 PNG, in the POST's own 200
//     answer (iDRAC runs no job for it: the scripts read the file from the
//     POST's answer). The older path /redfish/v1/Dell/Managers/{id}/
//     DellLCService/... that some clients still call is served too. Every
//     other personality answers the same body at vbmcd's own Manager action
//     Bmlab.ExportScreenShot, named in the Manager's Actions.Oem.
//   - Keys: Bmlab.SendKeys types a sequence of text and named keys on the
//     machine's keyboard, through the display the web console's graphical
//     console shows.
//   - Serial output: Bmlab.ExportSerialData returns the end of what the
//     machine printed on its serial port since it started (its serial log,
//     as Dell's DellSerialInterface.SerialDataExport returns the iDRAC's
//     capture).
//
// Each needs ConfigureComponents (Operator or Administrator), as the web
// console's graphical and serial consoles and IPMI's SOL do: no vendor
// personality lets a ReadOnly user take a screenshot here (see
// docs/vbmcd.md: no public record shows a vendor's BMC letting its
// read-only role see the screen; iDRAC gives the screen by its own
// Access Virtual Console privilege, which its Read Only role lacks).
// Screenshots are rate-limited per machine (WithScreenshotRate). Typing is
// held to the caller as it is now, key by key: a session that ends, an
// account deleted, disabled or lowered, stops it, as the web console's
// consoles stop at once.

const (
	dellLCAction    = "DellLCService.ExportServerScreenShot"
	bmlabShotAction = "Bmlab.ExportScreenShot"
	bmlabKeysAction = "Bmlab.SendKeys"
	bmlabSerial     = "Bmlab.ExportSerialData"

	// MaxKeys bounds the keystrokes of one SendKeys.
	MaxKeys = 1024
	// previewWidth is the width a Preview screenshot is scaled down to.
	previewWidth = 320
)

// FileTypes are the screenshots ExportServerScreenShot takes (Dell's
// AllowableValues, in Dell's order).
var FileTypes = []string{"LastCrashScreenShot", "Preview", "ServerScreenShot"}

func dellLCServiceURI(id string) string { return managerURI(id) + "/Oem/Dell/DellLCService" }

// screenRoutes are the hands-free console's resources and actions.
func screenRoutes() []*route {
	w := accounts.ConfigureComponents
	return []*route{
		r("Managers/*/Oem/Dell/DellLCService", route{get: dellOnly(getDellLCService)}),
		r("Managers/*/Oem/Dell/DellLCService/Actions/"+dellLCAction, route{post: dellOnly(postScreenShot(dellLCAction)), write: w}),
		r("Dell/Managers/*/DellLCService", route{get: dellOnly(getDellLCService)}),
		r("Dell/Managers/*/DellLCService/Actions/"+dellLCAction, route{post: dellOnly(postScreenShot(dellLCAction)), write: w}),
		r("Managers/*/Actions/Oem/"+bmlabShotAction, route{post: notDell(postScreenShot(bmlabShotAction)), write: w}),
		r("Managers/*/Actions/Oem/"+bmlabKeysAction, route{post: postSendKeys, write: w}),
		r("Managers/*/Actions/Oem/"+bmlabSerial, route{post: postSerialData, write: w}),
	}
}

// notDell serves h for machines whose screenshot is vbmcd's own action.
func notDell(h handlerFunc) handlerFunc {
	return func(s *Server, c *call) *apiError {
		if p, _ := s.personaOf(c.m); p.DellOEM {
			return newError(http.StatusNotFound, MsgResourceNotFound, "Action", c.path)
		}
		return h(s, c)
	}
}

// managerOemActions are vbmcd's own actions on machine m's Manager, named
// in its Actions.Oem; the screenshot only where the personality has no
// vendor's own.
func managerOemActions(m *machine.Machine, p *personality.Personality) obj {
	base := managerURI(m.ID) + "/Actions/Oem/"
	o := obj{
		"#" + bmlabKeysAction: obj{"target": base + bmlabKeysAction},
		"#" + bmlabSerial:     obj{"target": base + bmlabSerial},
	}
	if p == nil || !p.DellOEM {
		o["#"+bmlabShotAction] = obj{"target": base + bmlabShotAction, "FileType@Redfish.AllowableValues": FileTypes}
	}
	return o
}

// getDellLCService is Dell's Lifecycle Controller service, with the
// actions vbmcd serves of it: the screenshot, and its status
// (internal/personality/dell, which sushy-oem-idrac reads).
func getDellLCService(s *Server, c *call) *apiError {
	u := dellLCServiceURI(c.m.ID)
	if strings.HasPrefix(c.path, rootURI+"/Dell/") {
		u = rootURI + "/Dell/Managers/" + c.m.ID + "/DellLCService"
	}
	s.writeJSON(c, http.StatusOK, dell.LCService(u, obj{
		"#" + dellLCAction: obj{
			"target":                           u + "/Actions/" + dellLCAction,
			"FileType@Redfish.AllowableValues": FileTypes,
		},
	}))
	return nil
}

// postScreenShot takes a screenshot of the machine's screen; action names
// the action in errors.
func postScreenShot(action string) handlerFunc {
	return func(s *Server, c *call) *apiError {
		body, aerr := actionParams(c, action, "FileType")
		if aerr != nil {
			return aerr
		}
		ft, aerr := optionalEnum(body, action, "FileType", "ServerScreenShot", FileTypes)
		if aerr != nil {
			return aerr
		}
		if ft == "LastCrashScreenShot" {
			return newError(http.StatusNotFound, MsgResourceNotFound, "CrashScreenShot", ft).
				with("vbmcd records no crash screen: no crash of this machine was captured.")
		}
		if wait := s.screenshots.take(c.m.ID, s.now()); wait > 0 {
			secs := strconv.Itoa(max(1, int((wait+time.Second-1)/time.Second)))
			return newError(http.StatusTooManyRequests, MsgServiceTemporarilyUnavailable, secs).
				with("Too many screenshots of this machine; retry in "+secs+" s.").withHeader("Retry-After", secs)
		}
		img, err := s.svc.Screenshot(c.r.Context(), c.m.ID)
		if err != nil {
			if errors.Is(err, machine.ErrConflict) {
				return newError(http.StatusConflict, MsgResourceInStandby).with("The machine is off: its screen shows nothing.")
			}
			return s.modelError(c, err)
		}
		if ft == "Preview" {
			img = scaleTo(img, previewWidth)
		}
		var b bytes.Buffer
		enc := png.Encoder{CompressionLevel: png.BestSpeed}
		if err := enc.Encode(&b, img); err != nil {
			return s.modelError(c, err)
		}
		s.writeJSON(c, http.StatusOK, obj{
			"@Message.ExtendedInfo": []messageObject{newMessage(MsgSuccess)},
			"ServerScreenShotFile":  base64.StdEncoding.EncodeToString(b.Bytes()),
		})
		return nil
	}
}

// scaleTo scales img down to width w (nearest pixel), keeping its aspect.
func scaleTo(img image.Image, w int) image.Image {
	b := img.Bounds()
	if b.Dx() <= w {
		return img
	}
	h := max(1, b.Dy()*w/b.Dx())
	out := image.NewRGBA(image.Rect(0, 0, w, h))
	for y := range h {
		for x := range w {
			out.Set(x, y, img.At(b.Min.X+x*b.Dx()/w, b.Min.Y+y*b.Dy()/h))
		}
	}
	return out
}

// postSendKeys types {"Keys": [{"Text": "root"}, {"Key": "Enter"}, …]}
// on the machine's keyboard, in order; a Key is a name (machine.KeyNames)
// with any of Ctrl-, Alt-, Shift- before it, or one printable character.
// It answers once the keys are typed, with how many.
func postSendKeys(s *Server, c *call) *apiError {
	const action = bmlabKeysAction
	body, aerr := actionParams(c, action, "Keys")
	if aerr != nil {
		return aerr
	}
	raw, ok := body["Keys"]
	if !ok {
		return newError(http.StatusBadRequest, MsgActionParameterMissing, action, "Keys")
	}
	items, ok := raw.([]any)
	if !ok {
		return newError(http.StatusBadRequest, MsgActionParameterValueTypeError, argText(raw), "Keys", action)
	}
	var keys []machine.Keystroke
	for i, it := range items {
		where := "Keys/" + strconv.Itoa(i)
		o, ok := it.(map[string]any)
		if !ok || len(o) != 1 {
			return newError(http.StatusBadRequest, MsgActionParameterValueFormatError, argText(it), where, action).
				with(`Each item is {"Text": "..."} or {"Key": "Enter"}.`)
		}
		for k, v := range o {
			str, ok := v.(string)
			if !ok || (k != "Text" && k != "Key") {
				return newError(http.StatusBadRequest, MsgActionParameterValueFormatError, argText(it), where, action).
					with(`Each item is {"Text": "..."} or {"Key": "Enter"}.`)
			}
			if k == "Key" {
				st, err := machine.ParseKey(str)
				if err != nil {
					return newError(http.StatusBadRequest, MsgActionParameterValueNotInList, argText(str), where+"/Key", action).with(err.Error())
				}
				keys = append(keys, st)
				continue
			}
			ks, err := machine.TextKeys(str)
			if err != nil {
				return newError(http.StatusBadRequest, MsgActionParameterValueFormatError, argText(str), where+"/Text", action).with(err.Error())
			}
			keys = append(keys, ks...)
		}
		if len(keys) > MaxKeys {
			return newError(http.StatusBadRequest, MsgActionParameterValueFormatError, "…", "Keys", action).
				with(fmt.Sprintf("At most %d keystrokes a request.", MaxKeys))
		}
	}
	n, err := s.svc.SendKeys(c.r.Context(), c.m.ID, keys, s.stillAllowed(c, accounts.ConfigureComponents))
	var rv *revoked
	switch {
	case errors.As(err, &rv):
		s.logChange(c, "typing stopped", zap.Int("typed", n), zap.Int("keys", len(keys)), zap.String("why", rv.why))
		e := newError(rv.status, rv.msg).with(fmt.Sprintf("%s; %d of %d keys were typed.", rv.why, n, len(keys)))
		if rv.status == http.StatusUnauthorized {
			e = e.withHeader("WWW-Authenticate", `Basic realm="bmlab"`)
		}
		return e
	case errors.Is(err, machine.ErrConflict):
		return newError(http.StatusConflict, MsgResourceInStandby).with(fmt.Sprintf("The machine is off: %d of %d keys were typed.", n, len(keys)))
	case err != nil:
		return s.modelError(c, err)
	}
	s.logChange(c, "keys typed", zap.Int("keys", n))
	s.writeJSON(c, http.StatusOK, obj{
		"@Message.ExtendedInfo": []messageObject{newMessage(MsgSuccess)},
		"KeysTyped":             n,
	})
	return nil
}

// revoked is why a request that runs a while lost the right to go on.
type revoked struct {
	status int
	msg    MessageID
	why    string
}

func (r *revoked) Error() string { return r.why }

// stillAllowed checks, each time it is called, that c's caller may still
// do what needs need on c's machine: its session is live, its account
// still logs in, still holds need and still reaches the machine. It does
// not mark the session used.
func (s *Server) stillAllowed(c *call, need accounts.Privilege) func() error {
	return func() error {
		who := c.who
		if c.session != nil {
			sess := s.sessions.find(c.session.token, s.now(), s.ttl, false)
			if sess != c.session {
				return &revoked{http.StatusUnauthorized, MsgNoValidSession, "the session ended"}
			}
			who = sess.who.Load()
		}
		if s.stale(who) {
			fresh := s.refresh(who)
			if fresh == nil {
				if c.session != nil {
					s.sessions.remove(c.session)
				}
				return &revoked{http.StatusUnauthorized, MsgNoValidSession, "the account was disabled or deleted"}
			}
			if c.session != nil {
				c.session.who.Store(fresh)
			}
			who = fresh
		}
		if who.priv&need != need || !who.canAccess(c.m) {
			return &revoked{http.StatusForbidden, MsgInsufficientPrivilege, "the account no longer holds the privilege"}
		}
		return nil
	}
}

// postSerialData answers the end of the machine's serial output since it
// started (machine.SerialTail bytes at most).
func postSerialData(s *Server, c *call) *apiError {
	if _, aerr := actionParams(c, bmlabSerial); aerr != nil {
		return aerr
	}
	data, err := s.svc.SerialLog(c.m.ID)
	if err != nil {
		return s.modelError(c, err)
	}
	s.writeJSON(c, http.StatusOK, obj{
		"@Message.ExtendedInfo": []messageObject{newMessage(MsgSuccess)},
		"SerialData":            strings.ToValidUTF8(string(data), "\uFFFD"),
	})
	return nil
}

// screenLimits rate-limits screenshots per machine: a bucket of burst
// tokens refilled at rate a second.
type screenLimits struct {
	rate  float64
	burst float64
	mu    sync.Mutex
	by    map[string]*bucket
}

type bucket struct {
	tokens float64
	at     time.Time
}

// DefaultScreenshotRate and DefaultScreenshotBurst bound the screenshots
// of one machine: a screenshot opens the display, reads the whole screen
// and encodes a PNG (docs/performance.md has what that costs).
const (
	DefaultScreenshotRate  = 4.0
	DefaultScreenshotBurst = 8
)

// WithScreenshotRate sets how many screenshots of one machine a second
// its BMC takes, after a burst of burst; past it, 429 with Retry-After.
func WithScreenshotRate(perSecond float64, burst int) Option {
	return func(s *Server) { s.screenshots.rate, s.screenshots.burst = perSecond, float64(burst) }
}

// take spends a token of machine id's bucket; when none is left it
// returns how long until one is.
func (l *screenLimits) take(id string, now time.Time) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.by == nil {
		l.by = map[string]*bucket{}
	}
	b := l.by[id]
	if b == nil {
		if len(l.by) >= 1<<16 {
			clear(l.by) // machines come and go; full buckets are the default
		}
		b = &bucket{tokens: l.burst, at: now}
		l.by[id] = b
	}
	b.tokens = min(l.burst, b.tokens+now.Sub(b.at).Seconds()*l.rate)
	b.at = now
	if b.tokens >= 1 {
		b.tokens--
		return 0
	}
	return time.Duration((1 - b.tokens) / l.rate * float64(time.Second))
}
