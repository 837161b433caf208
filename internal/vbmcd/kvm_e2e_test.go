package vbmcd

import (
	"crypto/tls"
	"fmt"
	"net/http"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	"github.com/digitalocean/go-libvirt"
	"github.com/gorilla/websocket"
	"github.com/stmcginnis/gofish/schemas"
	"libvirt.org/go/libvirtxml"

	"github.com/bmlab/bmlab/internal/testenv"
	"github.com/bmlab/bmlab/internal/virttest"
)

// canvasPixels is how many pixels of the graphical console's canvas differ
// from its first one (a blank canvas: none), -1 without a canvas.
const canvasPixels = `(() => {
  const c = document.querySelector('#display canvas');
  if (!c || !c.width || !c.height) return -1;
  const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
  let n = 0;
  for (let i = 4; i < d.length; i += 4) if (d[i] !== d[0] || d[i+1] !== d[1] || d[i+2] !== d[2]) n++;
  return n;
})()`

// TestE2EWebUIGraphicalConsole: the web console's graphical console (KVM)
// over a real VM, in chromium. The VM is defined without a display (as a
// domain of other tools may be); vbmcd's power-on gives it its VNC display
// on a unix socket. The page shows the machine's screen (the firmware's:
// SeaBIOS and grub's start, not a blank canvas), keys typed on it reach
// grub (whose answer is in the serial log: the marker disk's grub writes to
// the serial port and reads both the serial port and the keyboard), the
// Manager says it has a KVMIP console, and a ReadOnly user gets none.
func TestE2EWebUIGraphicalConsole(t *testing.T) {
	lab := virttest.New(t, "e2e-kvm-")
	vm := lab.NewVM(t, "a", virttest.VMOptions{DiskMarker: true, NoCD: true})
	lab.RemoveGraphics(t, vm)
	base := daemon(t, "e2e-kvm-", func(c *Config) { c.WebConsole = true })

	// gofish reads the KVM on the Manager (where BMCs put it) and on the
	// System (where the schema puts a host's).
	gc := gofishClient(t, base, "admin", "e2e-pass", false)
	mgr, err := schemas.GetObject[schemas.Manager](gc, "/redfish/v1/Managers/"+vm.ID)
	if err != nil {
		t.Fatalf("gofish Manager: %v", err)
	}
	if k := mgr.GraphicalConsole; !k.ServiceEnabled || fmt.Sprint(k.ConnectTypesSupported) != "[KVMIP]" || k.MaxConcurrentSessions == 0 {
		t.Errorf("Manager's GraphicalConsole: %+v, want enabled, KVMIP", k)
	}
	sys, err := schemas.GetObject[schemas.ComputerSystem](gc, "/redfish/v1/Systems/"+vm.ID)
	if err != nil {
		t.Fatalf("gofish ComputerSystem: %v", err)
	}
	if k := sys.GraphicalConsole; !k.ServiceEnabled || fmt.Sprint(k.ConnectTypesSupported) != "[KVMIP]" || k.MaxConcurrentSessions == 0 {
		t.Errorf("System's GraphicalConsole: %+v, want enabled, KVMIP", k)
	}

	if st, body := rf(t, base, "admin", "e2e-pass", "POST", "/redfish/v1/Systems/"+vm.ID+"/Actions/ComputerSystem.Reset",
		map[string]any{"ResetType": "On"}); st >= 300 {
		t.Fatalf("power on: %d %v", st, body)
	}
	vm.WaitMarker(t, testenv.DiskMarker, 0, bootTimeout)
	var live libvirtxml.Domain
	if err := live.Unmarshal(lab.LiveXML(t, vm.Name, 0)); err != nil {
		t.Fatal(err)
	}
	if g := live.Devices.Graphics; len(g) != 1 || g[0].VNC == nil || g[0].VNC.Socket == "" {
		t.Fatalf("the VM runs without the VNC display vbmcd adds: %+v", g)
	}
	inactive := lab.LiveXML(t, vm.Name, libvirt.DomainXMLInactive)
	if !strings.Contains(inactive, "<graphics type=\"vnc\"") && !strings.Contains(inactive, "<graphics type='vnc'") {
		t.Errorf("the display is not in the domain's definition:\n%s", inactive)
	}

	b := newBrowser(t, base)
	b.login(t, "admin", "e2e-pass")
	start := time.Now()
	b.run(t, "the graphical console connects", 30*time.Second,
		chromedp.Navigate(base+"/#/system/"+vm.ID),
		waitJS(`document.querySelector('#display') && document.querySelector('#display').dataset.connected === '1'`))
	var differ int
	b.run(t, "the machine's screen on the canvas", 60*time.Second,
		waitJS(canvasPixels+` > 500`),
		chromedp.Evaluate(canvasPixels, &differ))
	t.Logf("the screen shows %v after the page opened: %d pixels differ from the first", time.Since(start).Round(time.Millisecond), differ)
	b.screenshot(t, "screen")

	// Keys typed on the canvas reach grub: an unknown command, whose
	// error names it (grub's own echo of the line cannot fake that).
	// Lowercase and digits only: no modifier in between.
	answer := regexp.MustCompile("can't find command .?vnckeys42")
	var active string
	b.run(t, "focus the screen", 10*time.Second,
		chromedp.Click("#display canvas", chromedp.ByQuery),
		chromedp.Evaluate(`document.activeElement ? document.activeElement.tagName : ''`, &active))
	if active != "CANVAS" {
		t.Fatalf("the focused element after a click on the screen is %q, want the canvas", active)
	}
	for i := 0; ; i++ {
		b.run(t, "type on the screen", 10*time.Second,
			chromedp.KeyEvent("vnckeys42"),
			chromedp.KeyEvent(kb.Enter))
		if testenv.WaitFor(10*time.Second, func() bool {
			log, _ := os.ReadFile(vm.SerialLog)
			return answer.Match(log)
		}) {
			break
		}
		if i == 2 {
			log, _ := os.ReadFile(vm.SerialLog)
			b.screenshot(t, "keys-lost")
			t.Fatalf("keys typed on the screen did not reach grub; serial log ends:\n%s", tail(log, 800))
		}
		t.Logf("grub has not answered the keys typed on the screen yet; typing again")
	}
	b.screenshot(t, "typed")

	// A ReadOnly user gets no graphical console: the page says why, and
	// the socket itself refuses the user's token.
	addAccount(t, base, "viewer", "ReadOnly")
	b.run(t, "log out", 10*time.Second, chromedp.Click("#logout", chromedp.ByID), chromedp.WaitVisible("#login", chromedp.ByID))
	b.login(t, "viewer", "Web-pass-1234")
	var tok string
	var canvases int
	b.run(t, "viewer's graphical console", 20*time.Second,
		chromedp.Navigate(base+"/#/system/"+vm.ID),
		waitJS(`document.querySelector('#display-status') && document.querySelector('#display-status').textContent.includes('Operator')`),
		chromedp.Evaluate(`document.querySelectorAll('#display canvas').length`, &canvases),
		chromedp.Evaluate(`sessionStorage.getItem('vbmcd.token')`, &tok))
	if canvases != 0 {
		t.Errorf("the ReadOnly user's page has %d canvases", canvases)
	}
	b.screenshot(t, "readonly")
	d := websocket.Dialer{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, HandshakeTimeout: 10 * time.Second} //nolint:gosec // vbmcd's self-signed certificate
	conn, _, err := d.Dial("wss"+strings.TrimPrefix(base, "https")+"/ui/display/"+vm.ID, http.Header{"Origin": {base}})
	if err != nil {
		t.Fatalf("websocket: %v", err)
	}
	defer conn.Close()
	_ = conn.WriteJSON(map[string]string{"Token": tok})
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, msg, err := conn.ReadMessage()
	if err == nil {
		_, _, err = conn.ReadMessage()
	}
	if !websocket.IsCloseError(err, websocket.ClosePolicyViolation) || !strings.Contains(string(msg), "insufficient privilege") {
		t.Errorf("a ReadOnly user's display socket: %q then %v, want insufficient privilege and close 1008", msg, err)
	}
}

func tail(b []byte, n int) string {
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}
