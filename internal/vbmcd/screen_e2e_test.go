package vbmcd

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/digitalocean/go-libvirt"
	"libvirt.org/go/libvirtxml"

	"github.com/bmlab/bmlab/internal/bmcscreen"
	"github.com/bmlab/bmlab/internal/testenv"
	"github.com/bmlab/bmlab/internal/virttest"
)

// redefine changes a VM's definition.
func redefine(t testing.TB, lab *virttest.Lab, vm *virttest.VM, change func(*libvirtxml.Domain)) {
	t.Helper()
	var def libvirtxml.Domain
	if err := def.Unmarshal(lab.LiveXML(t, vm.Name, libvirt.DomainXMLInactive)); err != nil {
		t.Fatal(err)
	}
	change(&def)
	x, err := def.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lab.Client.DomainDefineXML(x); err != nil {
		t.Fatal(err)
	}
}

// TestE2EScreenFirmwareMenu drives OVMF's setup through the BMC alone, as
// a person at an iDRAC's console would: a UEFI VM whose boot order puts its
// disk first (the disk marker would boot) and whose firmware waits 15 s
// for a key (<bootmenu timeout>), at a BMC of its own that looks like an
// iDRAC 9 (127.34.45.1, its certificate from a lab CA). Through that BMC's
// Redfish only: power on; the screen says "Start boot option" (read by
// OCR from Dell's screenshot action), Esc; the front page lists "Boot
// Maintenance Manager", Down Down Enter; the boot manager lists the disk,
// the shell and the DVD-ROM, and Dell's own client call (python3-requests,
// Dell's script's shape) reads the same screen; Down as often as the
// DVD-ROM's place in that list, Enter; the CD's marker appears in the
// serial output (Bmlab.ExportSerialData), and the disk's never did.
func TestE2EScreenFirmwareMenu(t *testing.T) {
	testenv.Command(t, "tesseract")
	py := testenv.Command(t, "/usr/bin/python3")
	lab := virttest.New(t, "e2e-fw-")
	vm := lab.NewVM(t, "a", virttest.VMOptions{UEFI: true, DiskMarker: true, BootOrder: []string{"hd", "cdrom"}})
	redefine(t, lab, vm, func(d *libvirtxml.Domain) {
		d.OS.BootMenu = &libvirtxml.DomainBootMenu{Enable: "yes", Timeout: "15000"}
	})
	caCert, caKey := labCA(t)
	const addr = "127.34.45.1"
	daemon(t, "e2e-fw-", func(c *Config) {
		c.Personality = "idrac9"
		c.BMCAddresses = []string{addr}
		c.TLSCACert, c.TLSCAKey = caCert, caKey
	})
	c := bmcClient(t, "https://"+addr+"/redfish/v1/Systems/System.Embedded.1", caCert)
	ctx := t.Context()
	if dell, err := c.Dell(ctx); err != nil || !dell {
		t.Fatalf("the iDRAC's screenshot is not Dell's DellLCService action: %v, %v", dell, err)
	}
	if st, body := rf(t, "https://"+addr, "admin", "e2e-pass", "POST", "/redfish/v1/Systems/System.Embedded.1/Actions/ComputerSystem.Reset",
		map[string]any{"ResetType": "On"}); st >= 300 {
		t.Fatalf("power on: %d %v", st, body)
	}
	shots := screenshotDir(t)
	step := func(what string, within time.Duration, where bmcscreen.Where) bmcscreen.Found {
		t.Helper()
		return waitStep(t, c, what, within, where, shots)
	}
	typ := func(seq string) { t.Helper(); typeSeq(t, c, seq) }
	step("Start boot option", 3*time.Minute, bmcscreen.OnScreen)
	typ("<Esc>")
	step("Boot Maintenance Manager", time.Minute, bmcscreen.OnScreen)
	typ("<Down><Down><Enter>")
	menu := step("Boot Manager Menu", time.Minute, bmcscreen.OnScreen)
	// The entries, in the order the screen lists them: the CD is picked
	// by its place there, as a person reading the screen would.
	m := bmcscreen.Fold(menu.Text)
	entries := []string{"Misc Device", "Internal Shell", "QEMU DVD-ROM"}
	at := map[string]int{}
	for _, e := range entries {
		if at[e] = strings.Index(m, bmcscreen.Fold(e)); at[e] < 0 {
			t.Fatalf("the boot manager does not list %q:\n%s", e, menu.Text)
		}
	}
	slices.SortFunc(entries, func(a, b string) int { return at[a] - at[b] })
	downs := slices.Index(entries, "QEMU DVD-ROM")
	t.Logf("the boot manager lists %q", entries)

	// Dell's own call shape, from Python: the same screen.
	png := filepath.Join(t.TempDir(), "dell.png")
	out, err := exec.CommandContext(ctx, py, "testdata/dell_screenshot.py", addr, "admin", "e2e-pass", caCert, "ServerScreenShot", png).CombinedOutput()
	if err != nil {
		t.Fatalf("Dell's screenshot from Python: %v\n%s", err, out)
	}
	t.Logf("python3-requests: %s", strings.TrimSpace(string(out)))
	b, err := os.ReadFile(png)
	if err != nil {
		t.Fatal(err)
	}
	txt, err := bmcscreen.OCRText(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	shots.keep(b, txt)
	if !strings.Contains(bmcscreen.Fold(txt), bmcscreen.Fold("Boot Manager Menu")) {
		t.Fatalf("the screenshot Python read does not show the boot manager:\n%s", txt)
	}

	typ(strings.Repeat("<Down>", downs) + "<Enter>")
	step(testenv.Marker, 3*time.Minute, bmcscreen.OnSerial)
	serial, err := c.Serial(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(serial, testenv.DiskMarker) {
		t.Errorf("the disk booted too:\n%s", serial)
	}
}

// bmcClient is a bmcscreen client of the System at url, verifying the
// BMC's certificate against ca.
func bmcClient(t testing.TB, url, ca string) *bmcscreen.Client {
	t.Helper()
	pem, err := os.ReadFile(ca)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	hc := &http.Client{Timeout: 60 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
	c, err := bmcscreen.New(hc, url, "admin", "e2e-pass")
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// shotDir keeps a test's screenshots in _out/screenshots/TEST/, numbered,
// each with the text OCR read on it.
type shotDir struct {
	dir string
	n   int
}

func screenshotDir(t testing.TB) *shotDir {
	dir := filepath.Join("..", "..", "_out", "screenshots", t.Name())
	_ = os.RemoveAll(dir)
	_ = os.MkdirAll(dir, 0o755)
	return &shotDir{dir: dir}
}

func (s *shotDir) keep(png []byte, text string) {
	s.n++
	base := filepath.Join(s.dir, fmt.Sprintf("%03d", s.n))
	_ = os.WriteFile(base+".png", png, 0o644)
	_ = os.WriteFile(base+".txt", []byte(text), 0o644)
}

// TestE2EScreenTextUI drives a text UI inside a guest through the BMC
// alone: hack/build-tui-image.sh's Debian kernel and initramfs, booted
// directly, run a whiptail menu and input box on the VGA console. Through
// the generic BMC's Redfish only (vbmcd's own Bmlab actions): power on;
// the screen shows the menu ("Choose a role", its three entries); Down
// Enter picks the second; the screen asks for a "Hostname"; "bmlab42"
// Enter; the serial output says what was chosen and the screen says it
// took effect.
func TestE2EScreenTextUI(t *testing.T) {
	c := tuiVM(t)
	shots := screenshotDir(t)
	step := func(what string, within time.Duration, where bmcscreen.Where) bmcscreen.Found {
		t.Helper()
		return waitStep(t, c, what, within, where, shots)
	}
	typ := func(seq string) { t.Helper(); typeSeq(t, c, seq) }
	menu := step("Choose a role", 3*time.Minute, bmcscreen.OnScreen)
	for _, e := range []string{"alpha", "bravo", "charlie"} {
		if !strings.Contains(bmcscreen.Fold(menu.Text), bmcscreen.Fold(e)) {
			t.Fatalf("the menu does not list %q:\n%s", e, menu.Text)
		}
	}
	typ("<Down><Enter>")
	step("Hostname", time.Minute, bmcscreen.OnScreen)
	typ("bmlab42<Enter>")
	step("BMLAB-TUI choice=bravo hostname=bmlab42", time.Minute, bmcscreen.OnSerial)
	step("Configured bravo as bmlab42", time.Minute, bmcscreen.OnScreen)
}

// tuiVM boots hack/build-tui-image.sh's image in a VM served by a daemon
// of the test's own, through its Redfish, and returns a bmcscreen client
// of its BMC.
func tuiVM(t testing.TB) *bmcscreen.Client {
	t.Helper()
	testenv.Command(t, "tesseract")
	kernel := filepath.Join(testenv.RepoRoot(), "_out", "tools", "tui-vmlinuz")
	initrd := filepath.Join(testenv.RepoRoot(), "_out", "tools", "tui-initrd.img")
	testenv.Require(t, fileExists(kernel) && fileExists(initrd), "the text-UI image in _out/tools (hack/build-tui-image.sh builds it)")
	lab := virttest.New(t, "e2e-tui-")
	vm := lab.NewVM(t, "a", virttest.VMOptions{NoCD: true, MemoryMiB: 256})
	dir := testenv.QemuDir(t)
	testenv.CopyFile(t, kernel, filepath.Join(dir, "vmlinuz"))
	testenv.CopyFile(t, initrd, filepath.Join(dir, "initrd.img"))
	redefine(t, lab, vm, func(d *libvirtxml.Domain) {
		d.OS.Kernel, d.OS.Initrd = filepath.Join(dir, "vmlinuz"), filepath.Join(dir, "initrd.img")
		d.OS.Cmdline = "console=ttyS0 console=tty1 quiet"
	})
	base := daemon(t, "e2e-tui-")
	c := bmcClient(t, base+"/redfish/v1/Systems/"+vm.ID, caFile)
	if st, body := rf(t, base, "admin", "e2e-pass", "POST", "/redfish/v1/Systems/"+vm.ID+"/Actions/ComputerSystem.Reset",
		map[string]any{"ResetType": "On"}); st >= 300 {
		t.Fatalf("power on: %d %v", st, body)
	}
	return c
}

// typeSeq types seq through the BMC.
func typeSeq(t testing.TB, c *bmcscreen.Client, seq string) {
	t.Helper()
	start := time.Now()
	n, err := c.Type(context.Background(), seq)
	if err != nil {
		t.Fatalf("type %q: %v", seq, err)
	}
	t.Logf("typed %q: %d keys in %s", seq, n, time.Since(start).Round(time.Millisecond))
}

// waitStep waits within for what to show where, keeping the screenshots.
func waitStep(t testing.TB, c *bmcscreen.Client, what string, within time.Duration, where bmcscreen.Where, shots *shotDir) bmcscreen.Found {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	o := bmcscreen.WaitOptions{Where: where}
	if shots != nil {
		o.Screen = shots.keep
	}
	f, err := c.WaitFor(ctx, what, o)
	if err != nil {
		t.Fatalf("waiting for %q: %v", what, err)
	}
	t.Logf("%q after %s (%d screenshots)", what, f.After.Round(time.Millisecond), f.Screens)
	return f
}

// BenchmarkScreen: the hands-free console's costs on a real VM showing a
// whiptail menu (720×400 VGA text mode) through vbmcd's Redfish: a
// screenshot (POST Bmlab.ExportScreenShot to the decoded PNG, paced under
// the rate limit), OCR of one (tesseract, as WaitFor runs it), and keys
// typed into the input box (a 200-character line, then checked whole on
// the serial output: keys a second with none lost).
func BenchmarkScreen(b *testing.B) {
	c := tuiVM(b)
	ctx := context.Background()
	waitStep(b, c, "Choose a role", 3*time.Minute, bmcscreen.OnScreen, nil)
	var png []byte
	b.Run("screenshot", func(b *testing.B) {
		var size int
		for i := 0; i < b.N; i++ {
			var err error
			if png, err = c.Screenshot(ctx); err != nil {
				b.Fatal(err)
			}
			size = len(png)
			b.StopTimer()
			time.Sleep(300 * time.Millisecond) // under 4 a second
			b.StartTimer()
		}
		b.ReportMetric(float64(size), "PNG-bytes")
	})
	b.Run("ocr", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if _, err := bmcscreen.OCRText(ctx, png); err != nil {
				b.Fatal(err)
			}
		}
	})
	// The input box takes one line: the testing package calls a
	// sub-benchmark more than once (b.N = 1 first), so the line is typed
	// and checked at the first call and its rate reported at each.
	var keysPerSecond float64
	b.Run("keys", func(b *testing.B) {
		if keysPerSecond == 0 {
			if _, err := c.Type(ctx, "<Enter>"); err != nil {
				b.Fatal(err)
			}
			waitStep(b, c, "Hostname", time.Minute, bmcscreen.OnScreen, nil)
			line := strings.Repeat("abcdefghij0123456789", 10)
			start := time.Now()
			n, err := c.Type(ctx, line+"<Enter>")
			if err != nil {
				b.Fatal(err)
			}
			took := time.Since(start)
			waitStep(b, c, "hostname="+line, time.Minute, bmcscreen.OnSerial, nil)
			keysPerSecond = float64(n) / took.Seconds()
			b.Logf("%d keys typed in %s, every one on the serial output", n, took.Round(time.Millisecond))
		}
		b.ReportMetric(keysPerSecond, "keys/s")
		b.ReportMetric(0, "ns/op")
	})
}

func fileExists(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular()
}
