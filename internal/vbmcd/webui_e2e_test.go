package vbmcd

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	"github.com/gorilla/websocket"

	"github.com/bmlab/bmlab/internal/machine"
	"github.com/bmlab/bmlab/internal/testenv"
	"github.com/bmlab/bmlab/internal/virttest"
)

// The web console's tests drive a real browser: Debian's chromium,
// headless, through chromedp. Each test fails when the page makes a request
// to another origin or the browser reports a Content-Security-Policy
// violation, and keeps screenshots under _out/screenshots/.

// browser is one headless chromium and what it saw.
type browser struct {
	ctx    context.Context
	origin string

	mu       sync.Mutex
	requests []string // every URL the page asked for
	problems []string // CSP violations, script errors
	// netChanges counts requests chromium aborted because the host's
	// addresses changed.
	netChanges int
}

// newBrowser starts chromium for a console at origin (https://host:port).
func newBrowser(t *testing.T, origin string) *browser {
	t.Helper()
	testenv.Integration(t)
	exe, err := exec.LookPath("chromium")
	testenv.Require(t, err == nil, "chromium (hack/install-deps.sh installs it)")
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(exe),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1440, 1000),
		// vbmcd's self-signed certificate; the tests check TLS elsewhere.
		chromedp.Flag("ignore-certificate-errors", true),
		chromedp.Flag("disable-gpu", true),
	)
	if os.Geteuid() == 0 {
		opts = append(opts, chromedp.NoSandbox)
	}
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelC := chromedp.NewContext(actx)
	t.Cleanup(func() { cancelC(); cancelA() })
	b := &browser{ctx: ctx, origin: origin}
	chromedp.ListenTarget(ctx, func(ev any) {
		b.mu.Lock()
		defer b.mu.Unlock()
		switch e := ev.(type) {
		case *network.EventRequestWillBeSent:
			b.requests = append(b.requests, e.Request.URL)
		case *log.EventEntryAdded:
			// net::ERR_NETWORK_CHANGED: chromium aborts requests when
			// an address of the host changes, which other tests on a
			// shared machine do; the page retries (logged, not failed).
			if strings.Contains(e.Entry.Text, "ERR_NETWORK_CHANGED") {
				b.netChanges++
				return
			}
			if e.Entry.Level == log.LevelError && !strings.Contains(e.Entry.Text, "status of 40") {
				b.problems = append(b.problems, "log: "+e.Entry.Text)
			}
		case *runtime.EventExceptionThrown:
			b.problems = append(b.problems, "exception: "+e.ExceptionDetails.Error())
		}
	})
	if err := chromedp.Run(ctx, network.Enable(), log.Enable(), runtime.Enable()); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	t.Cleanup(func() { b.check(t) })
	return b
}

// check fails the test for a request to another origin or a problem the
// browser reported.
func (b *browser) check(t *testing.T) {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, u := range b.requests {
		if strings.HasPrefix(u, "data:") {
			continue
		}
		p, err := url.Parse(u)
		if err != nil || (p.Scheme+"://"+p.Host != b.origin && "https://"+p.Host != b.origin) {
			t.Errorf("the page made a request to another origin: %s", u)
		}
	}
	for _, p := range b.problems {
		t.Errorf("the browser reported: %s", p)
	}
	if b.netChanges > 0 {
		t.Logf("chromium aborted %d request(s) with ERR_NETWORK_CHANGED (the host's addresses changed); the page retried", b.netChanges)
	}
}

// press clicks a power button and waits for cond; when the browser's
// request failed under it (the page says "network error", see netChanges)
// it presses again, at most twice more.
func (b *browser) press(t *testing.T, what, sel, cond string, timeout time.Duration) {
	t.Helper()
	for attempt := 0; ; attempt++ {
		var res string
		b.run(t, what, timeout,
			chromedp.Evaluate(`document.querySelector('#action-result').textContent = ''`, nil),
			chromedp.Click(sel, chromedp.ByQuery),
			chromedp.Poll(`(`+cond+`) ? 'ok' : (document.querySelector('#action-result').textContent.includes('network error') ? 'again' : false)`, &res,
				chromedp.WithPollingInterval(50*time.Millisecond), chromedp.WithPollingTimeout(0)))
		if res == "ok" {
			return
		}
		if attempt == 2 {
			t.Fatalf("%s: the browser's request failed three times", what)
		}
		t.Logf("%s: the browser's request failed (network changed); pressing again", what)
	}
}

// run runs actions with a timeout, failing the test with what is on screen.
func (b *browser) run(t *testing.T, what string, timeout time.Duration, actions ...chromedp.Action) {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, timeout)
	defer cancel()
	if err := chromedp.Run(ctx, actions...); err != nil {
		b.screenshot(t, "failed-"+strings.ReplaceAll(what, " ", "-"))
		var text string
		tctx, cancelText := context.WithTimeout(b.ctx, 10*time.Second) // a page that hangs must not hang the test
		_ = chromedp.Run(tctx, chromedp.Text("body", &text, chromedp.ByQuery))
		cancelText()
		t.Fatalf("%s: %v\npage text:\n%s", what, err, text)
	}
}

// waitJS waits until the JavaScript expression is true.
func waitJS(expr string) chromedp.Action {
	// No timeout of its own (chromedp's default is 30 s): run's context
	// bounds it.
	return chromedp.Poll(expr, nil, chromedp.WithPollingInterval(50*time.Millisecond), chromedp.WithPollingTimeout(0))
}

// typeInto types s into the focused terminal: Enter as a key press (xterm
// reads control keys from keydown), text as the browser's text input (which
// xterm reads from the input event; chromedp's key events for printable
// characters reach xterm twice, as keydown text and as keypress).
func typeInto(s string) chromedp.Action {
	return chromedp.ActionFunc(func(ctx context.Context) error {
		for len(s) > 0 {
			i := strings.IndexByte(s, '\r')
			if i < 0 {
				i = len(s)
			}
			if i > 0 {
				if err := input.InsertText(s[:i]).Do(ctx); err != nil {
					return err
				}
			}
			if i < len(s) {
				if err := chromedp.KeyEvent(kb.Enter).Do(ctx); err != nil {
					return err
				}
				i++
			}
			s = s[i:]
		}
		return nil
	})
}

// screenshot keeps the whole page as _out/screenshots/<test>-<name>.png.
func (b *browser) screenshot(t *testing.T, name string) string {
	t.Helper()
	var png []byte
	ctx, cancel := context.WithTimeout(b.ctx, 20*time.Second)
	defer cancel()
	if err := chromedp.Run(ctx, chromedp.FullScreenshot(&png, 100)); err != nil {
		t.Logf("screenshot %s: %v", name, err)
		return ""
	}
	dir := filepath.Join(testenv.RepoRoot(), "_out", "screenshots")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, strings.ReplaceAll(t.Name(), "/", "-")+"-"+name+".png")
	if err := os.WriteFile(p, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", p)
	return p
}

// login logs in through the page's form.
func (b *browser) login(t *testing.T, user, pass string) {
	t.Helper()
	b.run(t, "log in as "+user, 30*time.Second,
		chromedp.Navigate(b.origin+"/"),
		chromedp.WaitVisible("#login", chromedp.ByID),
		chromedp.SendKeys("#user", user, chromedp.ByID),
		chromedp.SendKeys("#pass", pass, chromedp.ByID),
		chromedp.Click("#login-go", chromedp.ByID),
		waitJS(`document.querySelector('#rows') && document.querySelector('#rows').dataset.loaded === '1'`),
	)
}

// rf calls the Redfish API as user (Basic), outside the browser.
func rf(t testing.TB, base, user, pass, method, path string, body any) (int, map[string]any) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, base+path, rd)
	req.SetBasicAuth(user, pass)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	c := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	var out map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}

// addAccount makes a stored account through Redfish.
func addAccount(t *testing.T, base, user, role string) {
	t.Helper()
	st, body := rf(t, base, "admin", "e2e-pass", "POST", "/redfish/v1/AccountService/Accounts",
		map[string]any{"UserName": user, "Password": "Web-pass-1234", "RoleId": role, "Enabled": true})
	if st != http.StatusCreated {
		t.Fatalf("add account %s: %d %v", user, st, body)
	}
}

// TestWebUISim is the console over 1,000 simulated servers: log in, the
// list pages and filters, a power change made through Redfish elsewhere
// shows in the list without a reload, the system page acts, a ReadOnly
// user's buttons are disabled and the API's 403 is shown when one is
// clicked anyway, and the console's headers are strict.
func TestWebUISim(t *testing.T) {
	base := daemon(t, "webui-sim-", func(c *Config) {
		c.Backend, c.SimNodes, c.SimDelay, c.Libvirt, c.Domains = "sim", 1000, 300*time.Millisecond, nil, nil
		c.WebConsole = true
	})
	b := newBrowser(t, base)

	// The page's headers.
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	resp, err := c.Get(base + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'self'") || !strings.Contains(csp, "script-src 'self';") || strings.Contains(csp, "unsafe-eval") {
		t.Errorf("Content-Security-Policy %q: want default-src 'self' and script-src 'self' only", csp)
	}
	if resp.Header.Get("X-Frame-Options") != "DENY" {
		t.Errorf("X-Frame-Options %q: want DENY", resp.Header.Get("X-Frame-Options"))
	}

	start := time.Now()
	b.login(t, "admin", "e2e-pass")
	t.Logf("login to the first page of 1,000 systems: %v", time.Since(start).Round(time.Millisecond))
	var info string
	var n int
	b.run(t, "first page", 10*time.Second,
		chromedp.Text("#pageinfo", &info, chromedp.ByID),
		chromedp.Evaluate(`document.querySelectorAll('#rows tr').length`, &n))
	if n != 50 || !strings.Contains(info, "of 1000") {
		t.Fatalf("first page: %d rows, %q; want 50 rows of 1000", n, info)
	}
	b.screenshot(t, "systems")

	// The last page, then a filter.
	start = time.Now()
	b.run(t, "page 20", 15*time.Second,
		chromedp.Navigate(base+"/#/systems?page=20"),
		waitJS(`document.querySelector('#pageinfo') && document.querySelector('#pageinfo').textContent.startsWith('951–1000')`))
	t.Logf("page 20 of 20: %v", time.Since(start).Round(time.Millisecond))
	b.run(t, "filter", 15*time.Second,
		chromedp.SendKeys("#filter", "sim-0999", chromedp.ByID),
		waitJS(`document.querySelectorAll('#rows tr').length === 1 && document.querySelector('#pageinfo').textContent.includes('of 1')`))

	// A change made elsewhere (plain Redfish) shows without a reload.
	var id string
	b.run(t, "filtered row", 5*time.Second, chromedp.Evaluate(`document.querySelector('#rows tr').dataset.id`, &id))
	var marker bool
	b.run(t, "mark the page", 5*time.Second, chromedp.Evaluate(`window.notReloaded = true`, &marker))
	if st, body := rf(t, base, "admin", "e2e-pass", "POST", "/redfish/v1/Systems/"+id+"/Actions/ComputerSystem.Reset", map[string]any{"ResetType": "On"}); st >= 300 {
		t.Fatalf("power on %s: %d %v", id, st, body)
	}
	b.run(t, "the row turns On", 20*time.Second,
		waitJS(`document.querySelector('#rows tr').dataset.power === 'On' && window.notReloaded === true`))
	b.run(t, "the row's last event", 10*time.Second,
		waitJS(`document.querySelector('#rows tr td.last').textContent.includes('→ On')`))
	b.screenshot(t, "live")

	// The system page: boot override and power through the page.
	b.run(t, "system page", 20*time.Second,
		chromedp.Navigate(base+"/#/system/"+id),
		waitJS(`document.querySelector('#boot-target') && document.querySelector('#boot-target').options.length > 3`),
		chromedp.SetValue("#boot-target", "Cd", chromedp.ByID),
		chromedp.SetValue("#boot-enabled", "Once", chromedp.ByID),
		chromedp.Click("#boot-apply", chromedp.ByID),
		waitJS(`document.querySelector('#boot-now').textContent.includes('Cd, Once')`))
	b.press(t, "force off", "#reset-ForceOff", `document.querySelector('#sys-power [data-power]').dataset.power === 'Off'`, 20*time.Second)
	b.run(t, "the event log", 20*time.Second,
		waitJS(`[...document.querySelectorAll('#eventlog li')].some(li => li.textContent.includes('On → Off'))`))

	// Media by URL, from an image server on loopback.
	iso := testenv.MarkerISO(t)
	img := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.ServeFile(w, r, iso)
	}))
	defer img.Close()
	b.run(t, "insert media from the page", 30*time.Second,
		chromedp.SendKeys(`#media .media-item[data-slot="Cd"] input.media-url`, img.URL+"/boot.iso", chromedp.ByQuery),
		chromedp.Click(`#media .media-item[data-slot="Cd"] button.insert`, chromedp.ByQuery),
		waitJS(`(e => e && e.textContent.includes('boot.iso'))(document.querySelector('#media .media-item[data-slot="Cd"] .media-state'))`),
		waitJS(`[...document.querySelectorAll('#eventlog li')].some(li => li.textContent.includes('Cd inserted'))`))
	// A pending BIOS setting made elsewhere shows.
	if st, body := rf(t, base, "admin", "e2e-pass", "PATCH", "/redfish/v1/Systems/"+id+"/Bios/Settings",
		map[string]any{"Attributes": map[string]any{"ProcTurboMode": "Disabled"}}); st >= 300 {
		t.Fatalf("patch BIOS settings: %d %v", st, body)
	}
	b.run(t, "pending BIOS setting", 20*time.Second,
		waitJS(`document.querySelector('#bios-pending').textContent.startsWith('1 setting')`),
		waitJS(`[...document.querySelectorAll('#bios tr.pending')].some(tr => tr.textContent.includes('ProcTurboMode') && tr.textContent.includes('→ Disabled'))`))
	b.screenshot(t, "system")
	b.run(t, "eject media from the page", 30*time.Second,
		chromedp.Click(`#media .media-item[data-slot="Cd"] button.eject`, chromedp.ByQuery),
		waitJS(`(e => e && e.textContent === 'Empty')(document.querySelector('#media .media-item[data-slot="Cd"] .media-state'))`))

	// The Administrator makes a ReadOnly account on the accounts page.
	b.run(t, "add an account from the page", 30*time.Second,
		chromedp.Click("#nav-accounts", chromedp.ByID),
		chromedp.WaitVisible("#new-user", chromedp.ByID),
		chromedp.SendKeys("#new-user", "viewer", chromedp.ByID),
		chromedp.SendKeys("#new-pass", "Web-pass-1234", chromedp.ByID),
		chromedp.SetValue("#new-role", "ReadOnly", chromedp.ByID),
		chromedp.Click("#new-add", chromedp.ByID),
		waitJS(`[...document.querySelectorAll('#accounts tr')].some(tr => tr.textContent.startsWith('viewerReadOnly'))`))
	b.screenshot(t, "accounts")

	// A ReadOnly user sees, and cannot act.
	b.run(t, "log out", 10*time.Second, chromedp.Click("#logout", chromedp.ByID), chromedp.WaitVisible("#login", chromedp.ByID))
	b.login(t, "viewer", "Web-pass-1234")
	var disabled bool
	b.run(t, "viewer's system page", 20*time.Second,
		chromedp.Navigate(base+"/#/system/"+id),
		chromedp.WaitVisible("#reset-On", chromedp.ByID),
		chromedp.Evaluate(`document.querySelector('#reset-On').disabled`, &disabled))
	if !disabled {
		t.Errorf("a ReadOnly user's power button is enabled")
	}
	// Clicked anyway (the button enabled by hand): the API refuses, and the
	// page says so.
	b.run(t, "viewer's forced click", 20*time.Second,
		chromedp.Evaluate(`document.querySelector('#reset-On').disabled = false`, &disabled),
		chromedp.Click("#reset-On", chromedp.ByID),
		waitJS(`document.querySelector('#action-result').textContent.includes('403')`),
		waitJS(`document.querySelector('#console-status').textContent.includes('no serial console')`))
	var msg string
	b.run(t, "refusal text", 5*time.Second, chromedp.Text("#action-result", &msg, chromedp.ByID))
	t.Logf("the ReadOnly user's click: %s", msg)
	b.screenshot(t, "readonly")
	if st, _ := rf(t, base, "admin", "e2e-pass", "GET", "/redfish/v1/Systems/"+id, nil); st != 200 {
		t.Fatalf("get %s: %d", id, st)
	}
	if _, body := rf(t, base, "admin", "e2e-pass", "GET", "/redfish/v1/Systems/"+id, nil); body["PowerState"] != "Off" {
		t.Errorf("the ReadOnly user's click changed the power: %v", body["PowerState"])
	}
	b.run(t, "no accounts page for a viewer", 5*time.Second, waitJS(`document.querySelector('#nav-accounts') === null`))

	// Five wrong passwords from this address (the default lockout) lock
	// the viewer for it: the page's login then says the account is locked
	// and until when (issue 32: a plain 401).
	b.run(t, "log out", 10*time.Second, chromedp.Click("#logout", chromedp.ByID), chromedp.WaitVisible("#login", chromedp.ByID))
	for range 5 {
		if st, _ := rf(t, base, "viewer", "Wrong-pass-1", "GET", "/redfish/v1/Systems", nil); st != http.StatusUnauthorized {
			t.Fatalf("a wrong password: %d", st)
		}
	}
	b.run(t, "a locked account's login", 20*time.Second,
		chromedp.SendKeys("#user", "viewer", chromedp.ByID),
		chromedp.SendKeys("#pass", "Web-pass-1234", chromedp.ByID),
		chromedp.Click("#login-go", chromedp.ByID),
		waitJS(`document.querySelector('#login-msg').textContent.includes('locked for logins from this address')`))
	b.run(t, "refusal text", 5*time.Second, chromedp.Text("#login-msg", &msg, chromedp.ByID))
	t.Logf("the locked account's login: %s", msg)
	b.screenshot(t, "locked")
}

// TestWebUIAPI checks the console's own endpoints refuse what they should,
// without a browser: no token, a bad page, a websocket without a session.
func TestWebUIAPI(t *testing.T) {
	testenv.Integration(t)
	base := daemon(t, "webui-api-", func(c *Config) {
		c.Backend, c.SimNodes, c.Libvirt, c.Domains = "sim", 3, nil, nil
		c.WebConsole = true
	})
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	for _, tc := range []struct {
		path string
		want int
	}{
		{"/ui/api/systems", http.StatusUnauthorized},
		{"/ui/api/live", http.StatusUnauthorized},
		{"/ui/assets/app.js", http.StatusOK},
		{"/ui/assets/vendor/xterm/xterm.js", http.StatusOK},
		{"/ui/nothing", http.StatusNotFound},
	} {
		resp, err := c.Get(base + tc.path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("GET %s: %d, want %d", tc.path, resp.StatusCode, tc.want)
		}
	}
	// A session's token works; a cookie never does.
	req, _ := http.NewRequest("POST", base+"/redfish/v1/SessionService/Sessions", strings.NewReader(`{"UserName":"admin","Password":"e2e-pass"}`))
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	tok := resp.Header.Get("X-Auth-Token")
	for _, tc := range []struct {
		name   string
		header string
		value  string
		want   int
	}{
		{"token", "X-Auth-Token", tok, http.StatusOK},
		{"cookie", "Cookie", "X-Auth-Token=" + tok, http.StatusUnauthorized},
	} {
		req, _ := http.NewRequest("GET", base+"/ui/api/systems?skip=0&top=2", nil)
		req.Header.Set(tc.header, tc.value)
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var p struct {
			Total int
			Rows  []json.RawMessage
		}
		_ = json.NewDecoder(resp.Body).Decode(&p)
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("%s: %d, want %d", tc.name, resp.StatusCode, tc.want)
		}
		if tc.want == http.StatusOK && (p.Total != 3 || len(p.Rows) != 2) {
			t.Errorf("%s: %d of %d rows, want 2 of 3", tc.name, len(p.Rows), p.Total)
		}
	}
	req, _ = http.NewRequest("GET", base+"/ui/api/systems?top=100000", nil)
	req.Header.Set("X-Auth-Token", tok)
	resp, err = c.Do(req)
	if err != nil {
		t.Fatalf("top=100000: %v", err) // resp is nil: nothing else to look at
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("top=100000: %d, want 400", resp.StatusCode)
	}
	_ = fmt.Sprint()
}

// TestE2EWebUIConsole is the console over a real VM: a Once Cd override
// set on the page boots the marker ISO, whose marker shows in the console
// and whose power-off shows without a reload with the override spent; the
// page powers it on again and shows the state change, the serial console shows
// the disk's grub and what is typed reaches grub (its answer to an echo of
// a variable comes back, which grub's own echo of the typed line cannot
// fake), a page opened later gets the scroll-back, a ForceOff shows, a
// ReadOnly user gets no console, and a websocket from another origin is
// refused.
func TestE2EWebUIConsole(t *testing.T) {
	lab := virttest.New(t, "e2e-webui-")
	vm := lab.NewVM(t, "a", virttest.VMOptions{DiskMarker: true})
	base := daemon(t, "e2e-webui-", func(c *Config) { c.WebConsole = true })
	b := newBrowser(t, base)
	b.login(t, "admin", "e2e-pass")
	b.run(t, "the VM's row", 10*time.Second,
		waitJS(fmt.Sprintf(`(r => r && r.dataset.power === 'Off')(document.querySelector('#rows tr[data-id="%s"]'))`, vm.ID)))

	var ok bool
	b.run(t, "system page", 20*time.Second,
		chromedp.Navigate(base+"/#/system/"+vm.ID),
		chromedp.WaitVisible("#reset-On", chromedp.ByID),
		waitJS(`document.querySelector('#console-status').dataset.state === 'warn'`), // waiting: the VM is off
		chromedp.Evaluate(`window.notReloaded = true`, &ok))
	// Once from the CD: the marker ISO prints its marker and powers the VM
	// off, which the page shows by itself.
	b.run(t, "Once Cd from the page", 20*time.Second,
		waitJS(`document.querySelector('#boot-target').options.length > 3`),
		chromedp.SetValue("#boot-target", "Cd", chromedp.ByID),
		chromedp.SetValue("#boot-enabled", "Once", chromedp.ByID),
		chromedp.Click("#boot-apply", chromedp.ByID),
		waitJS(`document.querySelector('#boot-now').textContent.includes('Cd, Once')`))
	b.press(t, "power on for the CD", "#reset-On", `document.querySelector('#action-result').textContent.includes('accepted')`, 30*time.Second)
	// One condition, not three in a row: the page read Off before the start
	// too, and the power badge that counts is the one read after the
	// override was spent (the three in turn once passed while the guest
	// was still running).
	b.run(t, "the ISO powers the VM off", bootTimeout,
		waitJS(`document.querySelector('#sys-power [data-power]').dataset.power === 'Off' && window.notReloaded === true &&
			document.querySelector('#boot-now').textContent.startsWith('Now: none') &&
			[...document.querySelectorAll('#eventlog li')].some(li => li.textContent.includes('One-time boot override (Cd) used'))`))
	vm.WaitMarker(t, testenv.Marker, 0, bootTimeout) // it booted the CD
	// The console shows the marker when it connected before the ISO
	// printed it (about a second after the start under TCG; libvirt keeps
	// nothing for a console that connects later).
	var cdSeen bool
	b.run(t, "the CD's marker on the console", 5*time.Second,
		chromedp.Evaluate(fmt.Sprintf(`document.querySelector('#terminal').dataset.text.includes(%q)`, testenv.Marker), &cdSeen))
	t.Logf("the CD's marker on the page's console: %v", cdSeen)
	b.screenshot(t, "once-cd")

	// Then the disk, whose grub stays at its prompt.
	start := time.Now()
	b.press(t, "power on from the page", "#reset-On",
		`document.querySelector('#sys-power [data-power]').dataset.power === 'On' && window.notReloaded === true`, 60*time.Second)
	t.Logf("On clicked to On shown: %v", time.Since(start).Round(time.Millisecond))
	// The console connects once the domain runs; under load grub may have
	// printed its first lines by then (libvirt keeps no output for a late
	// console), so Enter asks grub for a fresh prompt until one shows.
	b.run(t, "the console connects", bootTimeout,
		waitJS(`document.querySelector('#console-status').dataset.state === 'good'`))
	prompts := `(document.querySelector('#terminal').dataset.text.match(/grub> /g) || []).length`
	for i := 0; ; i++ {
		var before int
		b.run(t, "count prompts", 5*time.Second, chromedp.Evaluate(prompts, &before))
		var ok bool
		ctx, cancel := context.WithTimeout(b.ctx, 3*time.Second)
		err := chromedp.Run(ctx,
			chromedp.Focus("#terminal textarea.xterm-helper-textarea", chromedp.ByQuery),
			typeInto("\r"),
			chromedp.Poll(fmt.Sprintf(`%s > %d`, prompts, before), &ok, chromedp.WithPollingTimeout(0)))
		cancel()
		if err == nil {
			break
		}
		if i == 20 {
			b.screenshot(t, "no-grub-prompt")
			t.Fatalf("grub's prompt did not answer Enter on the console: %v", err)
		}
	}
	t.Logf("On clicked to grub's prompt in the terminal: %v", time.Since(start).Round(time.Millisecond))
	// What the machine printed before the console connected (the disk's
	// marker, the first line of its boot; the CD's boot, which may have
	// ended before the console could connect) comes from the domain's
	// serial log: the console's scroll-back has both.
	b.run(t, "the serial log's scroll-back", 10*time.Second,
		waitJS(fmt.Sprintf(`document.querySelector('#terminal').dataset.text.includes(%q)`, testenv.DiskMarker)),
		waitJS(fmt.Sprintf(`document.querySelector('#terminal').dataset.text.includes(%q)`, testenv.Marker)))
	b.run(t, "type into grub", 30*time.Second,
		chromedp.Click("#terminal .xterm-screen", chromedp.ByQuery),
		chromedp.Focus("#terminal textarea.xterm-helper-textarea", chromedp.ByQuery),
		typeInto("\rset x=WEB\recho ${x}CONSOLE\r"),
		waitJS(`document.querySelector('#terminal').dataset.text.includes('WEBCONSOLE')`))
	b.screenshot(t, "console")

	// A page opened now gets the scroll-back: what grub printed before.
	b.run(t, "scroll-back", 30*time.Second,
		chromedp.Navigate(base+"/#/systems"),
		chromedp.WaitVisible("#rows", chromedp.ByID),
		chromedp.Navigate(base+"/#/system/"+vm.ID),
		waitJS(`document.querySelector('#terminal') && document.querySelector('#terminal').dataset.text.includes('WEBCONSOLE')`),
		waitJS(`document.querySelector('#console-status').dataset.state === 'good'`))

	// Another holder takes the console (as IPMI SOL or virsh console
	// would): the page says so and leaves it to them, not taking it back
	// every second, until asked.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	holder, err := lab.Backend.OpenConsole(ctx, vm.ID)
	if err != nil {
		t.Fatalf("open the console beside the page: %v", err)
	}
	defer holder.Close()
	held := make(chan error, 1)
	var heldOut testenv.Buffer
	go func() {
		_, err := io.Copy(&heldOut, holder)
		held <- err
	}()
	b.run(t, "the page sees the console taken", 30*time.Second,
		waitJS(`document.querySelector('#console-status').textContent.startsWith('taken')`),
		waitJS(`!document.querySelector('#console-take').hidden`))
	b.screenshot(t, "taken")
	if _, err := holder.Write([]byte("\recho HELD\r")); err != nil {
		t.Fatalf("type into the taken console: %v", err)
	}
	if !testenv.WaitFor(10*time.Second, func() bool { return strings.Contains(heldOut.String(), "\rHELD\n") }) {
		t.Fatalf("the other holder's console did not answer; got %q", heldOut.String())
	}
	select {
	case err := <-held:
		t.Fatalf("the page took the console back unasked: the other holder's stream ended (%v)", err)
	case <-time.After(3 * time.Second): // the page's old retry came after 1 s
	}
	// A page opened now finds it taken too, and leaves it.
	b.run(t, "reopen the page", 30*time.Second,
		chromedp.Navigate(base+"/#/systems"),
		chromedp.WaitVisible("#rows", chromedp.ByID),
		chromedp.Navigate(base+"/#/system/"+vm.ID),
		waitJS(`document.querySelector('#console-status').textContent.startsWith('taken')`))
	select {
	case err := <-held:
		t.Fatalf("a page opened again took the console unasked: the other holder's stream ended (%v)", err)
	case <-time.After(2 * time.Second):
	}
	b.run(t, "take the console back", 30*time.Second,
		chromedp.Click("#console-take", chromedp.ByID),
		waitJS(`document.querySelector('#console-status').dataset.state === 'good'`))
	select {
	case <-held:
	case <-time.After(20 * time.Second):
		t.Fatalf("the other holder kept the console after the page took it back")
	}

	// A websocket from another origin is refused at the handshake.
	d := websocket.Dialer{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, HandshakeTimeout: 10 * time.Second}
	wsURL := "wss" + strings.TrimPrefix(base, "https") + "/ui/console/" + vm.ID
	if _, resp, err := d.Dial(wsURL, http.Header{"Origin": {"https://evil.example"}}); err == nil || resp == nil || resp.StatusCode != http.StatusForbidden {
		t.Errorf("websocket from another origin: %v (%v), want 403", err, resp)
	}
	// The same origin without a session: closed with a policy violation.
	conn, _, err := d.Dial(wsURL, http.Header{"Origin": {base}})
	if err != nil {
		t.Fatalf("websocket: %v", err)
	}
	_ = conn.WriteJSON(map[string]string{"Token": "not-a-token"})
	_, _, err = conn.ReadMessage() // the error message
	if err == nil {
		_, _, err = conn.ReadMessage()
	}
	if !websocket.IsCloseError(err, websocket.ClosePolicyViolation) {
		t.Errorf("websocket with a bad token: %v, want close 1008", err)
	}
	conn.Close()

	// Log out in this page: the console of a second page on the same
	// session (another browser, given the session's token as a duplicated
	// tab is) stops within a second, and what is typed there no longer
	// reaches the machine (issue 32: a second tab kept typing 15 s after
	// Log out in the first). A second browser rather than a second tab:
	// headless chromium runs a background tab's page slowly and renders
	// none of it.
	var tok, sess string
	b.run(t, "the session", 5*time.Second,
		chromedp.Evaluate(`sessionStorage.getItem('vbmcd.token')`, &tok),
		chromedp.Evaluate(`sessionStorage.getItem('vbmcd.session')`, &sess))
	tab := newBrowser(t, base)
	tab.run(t, "a second page on the same session", 60*time.Second,
		chromedp.Navigate(base+"/"),
		chromedp.WaitVisible("#login", chromedp.ByID),
		chromedp.Evaluate(fmt.Sprintf(`sessionStorage.setItem('vbmcd.token', %q); sessionStorage.setItem('vbmcd.session', %q); true`, tok, sess), &ok),
		chromedp.Navigate(base+"/#/system/"+vm.ID),
		chromedp.Reload(),
		waitJS(`document.querySelector('#console-status') && document.querySelector('#console-status').dataset.state === 'good'`))
	b.run(t, "log out", 10*time.Second, chromedp.Click("#logout", chromedp.ByID), chromedp.WaitVisible("#login", chromedp.ByID))
	out := time.Now()
	tab.run(t, "the second page's console ends", 10*time.Second,
		waitJS(`!document.querySelector('#console-status') || document.querySelector('#console-status').dataset.state === 'bad'`))
	if took := time.Since(out); took > time.Second {
		t.Errorf("the second page's console ended %v after the logout, want within a second", took)
	} else {
		t.Logf("the second page's console ended %v after the logout", took.Round(time.Millisecond))
	}
	before := testenv.Count(vm.SerialLog, "GONE")
	var term bool
	tab.run(t, "is the terminal still there", 5*time.Second, chromedp.Evaluate(`!!document.querySelector('#terminal .xterm-helper-textarea')`, &term))
	if term {
		tab.run(t, "type after the logout", 10*time.Second,
			chromedp.Focus("#terminal textarea.xterm-helper-textarea", chromedp.ByQuery),
			typeInto("echo GONE\r"))
	}
	// The same token on a new socket, as a page that kept it would try.
	conn, _, err = d.Dial(wsURL, http.Header{"Origin": {base}})
	if err != nil {
		t.Fatalf("websocket: %v", err)
	}
	_ = conn.WriteJSON(map[string]string{"Token": tok})
	_, _, err = conn.ReadMessage()
	if err == nil {
		_, _, err = conn.ReadMessage()
	}
	if !websocket.IsCloseError(err, websocket.ClosePolicyViolation) {
		t.Errorf("a console with the logged-out token: %v, want close 1008", err)
	}
	_ = conn.WriteMessage(websocket.BinaryMessage, []byte("echo GONE\r"))
	conn.Close()
	time.Sleep(2 * time.Second) // the window in which nothing typed may reach grub
	if n := testenv.Count(vm.SerialLog, "GONE"); n != before {
		t.Errorf("what was typed after the logout reached the machine (%d times in its serial log)", n-before)
	}
	b.login(t, "admin", "e2e-pass")
	b.run(t, "system page again", 30*time.Second,
		chromedp.Navigate(base+"/#/system/"+vm.ID),
		waitJS(`document.querySelector('#console-status') && document.querySelector('#console-status').dataset.state === 'good'`))

	b.press(t, "force off from the page", "#reset-ForceOff", `document.querySelector('#sys-power [data-power]').dataset.power === 'Off'`, 60*time.Second)
	b.run(t, "the console waits", 30*time.Second, waitJS(`document.querySelector('#console-status').dataset.state === 'warn'`))
	lab.WaitPower(t, vm.ID, machine.PowerOff, 30*time.Second)

	// A ReadOnly user sees the machine and gets no console.
	addAccount(t, base, "viewer", "ReadOnly")
	b.run(t, "log out", 10*time.Second, chromedp.Click("#logout", chromedp.ByID), chromedp.WaitVisible("#login", chromedp.ByID))
	b.login(t, "viewer", "Web-pass-1234")
	b.run(t, "viewer's console", 20*time.Second,
		chromedp.Navigate(base+"/#/system/"+vm.ID),
		waitJS(`document.querySelector('#console-status').textContent.includes('Operator')`))
	b.screenshot(t, "readonly")
}

// TestE2EWebUIConsoleBesideSOL: the page's console and an IPMI SOL session
// (ipmitool, the real client) on one running VM share its one serial
// console: what grub prints shows on both, what either types reaches grub,
// and neither takes the console from the other (before the shared stream,
// the SOL session took it and the page said "taken").
func TestE2EWebUIConsoleBesideSOL(t *testing.T) {
	ipmi := newIPMITool(t, "e2e-pass")
	lab := virttest.New(t, "e2e-websol-")
	vm := lab.NewVM(t, "a", virttest.VMOptions{DiskMarker: true})
	base := daemon(t, "e2e-websol-", ipmi.ipmiOn, func(c *Config) { c.WebConsole = true })
	// Powered on before any page looks: libvirt gives a console that
	// connects now nothing of the boot so far; the page's scroll-back has
	// it from the domain's serial log.
	if code, body := rf(t, base, "admin", "e2e-pass", http.MethodPost, "/redfish/v1/Systems/"+vm.ID+"/Actions/ComputerSystem.Reset", map[string]string{"ResetType": "On"}); code != http.StatusNoContent {
		t.Fatalf("power on: %d %v", code, body)
	}
	vm.WaitMarker(t, testenv.DiskMarker, 0, bootTimeout)
	b := newBrowser(t, base)
	b.login(t, "admin", "e2e-pass")
	b.run(t, "system page", 20*time.Second,
		chromedp.Navigate(base+"/#/system/"+vm.ID),
		chromedp.WaitVisible("#reset-On", chromedp.ByID),
		waitJS(`document.querySelector('#console-status').dataset.state === 'good'`))
	b.run(t, "the boot's first line from the serial log", 10*time.Second,
		waitJS(fmt.Sprintf(`document.querySelector('#terminal').dataset.text.includes(%q)`, testenv.DiskMarker)))

	cmd, in, sol, err := ipmi.startSOL(t)
	if err != nil {
		t.Fatal(err)
	}
	// One Wait, here; the rest of the test reads its outcome.
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	defer func() {
		_ = cmd.Process.Kill()
		<-done
	}()
	if !testenv.WaitFor(20*time.Second, func() bool { return strings.Contains(sol.String(), "SOL Session operational") }) {
		t.Fatalf("ipmitool sol activate did not start: %q", sol.String())
	}
	// grub may still be booting (what is typed before it reads its
	// prompt is lost): ask for a prompt over SOL until one comes.
	prompt := func() bool {
		from := len(sol.String())
		if _, err := in.Write([]byte("\r")); err != nil {
			t.Fatal(err)
		}
		return testenv.WaitFor(2*time.Second, func() bool { return strings.Contains(sol.String()[from:], "grub>") })
	}
	if !testenv.WaitFor(60*time.Second, prompt) {
		t.Fatalf("no grub prompt over SOL; got %q", sol.String())
	}
	pageHas := func(what, s string) {
		t.Helper()
		b.run(t, what, 30*time.Second, waitJS(fmt.Sprintf(`document.querySelector('#terminal').dataset.text.includes(%q)`, s)))
	}
	// Typed over SOL: grub's answer (the typed line holds "${x}SIDE")
	// shows on the page too.
	if _, err := in.Write([]byte("set x=SOL\recho ${x}SIDE\r")); err != nil {
		t.Fatal(err)
	}
	if !testenv.WaitFor(30*time.Second, func() bool { return strings.Contains(sol.String(), "SOLSIDE") }) {
		t.Fatalf("grub's answer did not come back over SOL; got %q", sol.String())
	}
	pageHas("SOL's line on the page", "SOLSIDE")
	// Typed on the page: the answer reaches SOL too.
	b.run(t, "type on the page", 30*time.Second,
		chromedp.Click("#terminal .xterm-screen", chromedp.ByQuery),
		chromedp.Focus("#terminal textarea.xterm-helper-textarea", chromedp.ByQuery),
		typeInto("\rset y=WEB\recho ${y}SIDE\r"))
	pageHas("the page's line on the page", "WEBSIDE")
	if !testenv.WaitFor(30*time.Second, func() bool { return strings.Contains(sol.String(), "WEBSIDE") }) {
		t.Fatalf("the page's line did not reach SOL; got %q", sol.String())
	}
	var state string
	b.run(t, "console state", 5*time.Second, chromedp.Evaluate(`document.querySelector('#console-status').dataset.state + ' ' + document.querySelector('#console-status').textContent`, &state))
	if !strings.HasPrefix(state, "good") {
		t.Fatalf("the page's console beside SOL reads %q, want connected", state)
	}
	b.screenshot(t, "beside-sol")
	// SOL leaves; the page's console goes on.
	if _, err := in.Write([]byte("\r~.")); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		done <- err // for the deferred wait
	case <-time.After(20 * time.Second):
		t.Fatalf("ipmitool did not leave on ~.; got %q", sol.String())
	}
	b.run(t, "type after SOL left", 30*time.Second,
		chromedp.Focus("#terminal textarea.xterm-helper-textarea", chromedp.ByQuery),
		typeInto("\rset z=AFTER\recho ${z}SOL\r"),
		waitJS(`document.querySelector('#terminal').dataset.text.includes('AFTERSOL')`),
		waitJS(`document.querySelector('#console-status').dataset.state === 'good'`))
}
