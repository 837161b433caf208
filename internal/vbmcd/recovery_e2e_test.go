package vbmcd

import (
	"bufio"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bmlab/bmlab/internal/testenv"
	"github.com/bmlab/bmlab/internal/virt/virttest"
	"github.com/digitalocean/go-libvirt"
)

// TestE2ESIGKILLMidChange: vbmcd is killed with SIGKILL while a boot
// override, a virtual media insert (its image still downloading) and a BIOS
// change are under way, at several moments. After a restart, each machine
// is in one state or the other, never between: the override, the pending
// BIOS settings and the media are as the model and libvirt both say, the
// media either fully in the drive or not at all, and the changes can be
// made again.
func TestE2ESIGKILLMidChange(t *testing.T) {
	lab := virttest.New(t, "e2e-kill-")
	vms := []*virttest.VM{
		lab.NewVM(t, "boot", virttest.VMOptions{NoCD: true, DiskMarker: true}),
		lab.NewVM(t, "media", virttest.VMOptions{NoCD: true, DiskMarker: true}),
		lab.NewVM(t, "bios", virttest.VMOptions{NoCD: true, DiskMarker: true}),
	}
	root := testenv.RepoRoot()
	bin := filepath.Join(t.TempDir(), "vbmcd")
	if out, err := exec.Command("go", "build", "-o", bin, filepath.Join(root, "cmd/vbmcd")).CombinedOutput(); err != nil {
		t.Fatalf("build vbmcd: %v\n%s", err, out)
	}
	state, media := t.TempDir(), testenv.QemuDir(t)
	creds := filepath.Join(t.TempDir(), "creds.yaml")
	os.WriteFile(creds, []byte("username: admin\npassword: kill-pass-1\n"), 0o600)
	iso, err := os.ReadFile(testenv.MarkerISO(t))
	if err != nil {
		t.Fatal(err)
	}
	// The image trickles: an insert is mid-download for about a second.
	img := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", fmt.Sprint(len(iso)))
		for off := 0; off < len(iso); off += len(iso) / 20 {
			end := min(off+len(iso)/20, len(iso))
			if _, err := w.Write(iso[off:end]); err != nil {
				return
			}
			w.(http.Flusher).Flush()
			time.Sleep(50 * time.Millisecond)
		}
	}))
	defer img.Close()

	start := func() (*exec.Cmd, string) {
		t.Helper()
		cmd := exec.Command(bin, "--libvirt-uri", "qemu:///system", "--domains", "e2e-kill-*",
			"--redfish-addr", "127.0.0.1:0", "--insecure-http", "--ipmi=false", "--credentials-file", creds,
			"--state-dir", state, "--media-dir", media, "--media-allow-loopback")
		out, _ := cmd.StdoutPipe()
		cmd.Stderr = io.Discard
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		line, _ := bufio.NewReader(out).ReadString('\n')
		m := regexp.MustCompile(`Redfish at (http://[0-9.:]+)/redfish/v1`).FindStringSubmatch(line)
		if m == nil {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("vbmcd did not start: %q", line)
		}
		go io.Copy(io.Discard, out)
		return cmd, m[1]
	}
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	call := func(base, method, path, body string) (int, map[string]any) {
		req, _ := http.NewRequest(method, base+path, strings.NewReader(body))
		req.SetBasicAuth("admin", "kill-pass-1")
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := hc.Do(req)
		if err != nil {
			return 0, nil
		}
		defer resp.Body.Close()
		var v map[string]any
		json.NewDecoder(resp.Body).Decode(&v)
		return resp.StatusCode, v
	}
	sys := func(i int) string { return "/redfish/v1/Systems/" + vms[i].ID }
	cd := "/redfish/v1/Managers/" + vms[1].ID + "/VirtualMedia/Cd"

	var prevQuiet any // the pending value a cut-off PATCH leaves standing
	for round, after := range []time.Duration{0, 20 * time.Millisecond, 150 * time.Millisecond, 600 * time.Millisecond, 1500 * time.Millisecond} {
		cmd, base := start()
		var wg sync.WaitGroup
		for _, f := range []func(){
			func() {
				call(base, "PATCH", sys(0), `{"Boot":{"BootSourceOverrideTarget":"Cd","BootSourceOverrideEnabled":"Once"}}`)
			},
			func() {
				call(base, "POST", cd+"/Actions/VirtualMedia.InsertMedia", fmt.Sprintf(`{"Image":"%s/r%d.iso"}`, img.URL, round))
			},
			func() {
				call(base, "PATCH", sys(2)+"/Bios/Settings", fmt.Sprintf(`{"Attributes":{"QuietBoot":%v}}`, round%2 == 0))
			},
		} {
			wg.Add(1)
			go func() { defer wg.Done(); f() }()
		}
		time.Sleep(after)
		cmd.Process.Kill() // SIGKILL
		cmd.Wait()
		wg.Wait()

		// Restarted: one state or the other, as libvirt itself says.
		cmd, base = start()
		_, b := call(base, "GET", sys(0), "")
		boot, _ := b["Boot"].(map[string]any)
		target, enabled := boot["BootSourceOverrideTarget"], boot["BootSourceOverrideEnabled"]
		if !(target == "Cd" && enabled == "Once") && !(target == "None" && enabled == "Disabled") {
			t.Errorf("round %d: boot override %v/%v, want Cd/Once or None/Disabled", round, target, enabled)
		}
		def := lab.LiveXML(t, vms[0].Name, libvirt.DomainXMLInactive)
		if cdFirst := strings.Index(def, "<boot dev='cdrom'/>"); (target == "Cd") != (cdFirst >= 0) {
			t.Errorf("round %d: the model says %v, the definition's boot order disagrees:\n%s", round, target, def)
		}
		_, v := call(base, "GET", cd, "")
		// The drive as libvirt has it now (not this test's own view, which
		// follows libvirt's events).
		src := ""
		if m := regexp.MustCompile(`<disk type='file' device='cdrom'>\s*<driver[^>]*/>\s*<source file='([^']*)'`).FindStringSubmatch(lab.LiveXML(t, vms[1].Name, libvirt.DomainXMLInactive)); m != nil {
			src = m[1]
		}
		if inserted, _ := v["Inserted"].(bool); inserted {
			// In the drive whole, and the member names the URL.
			if src == "" || !strings.HasPrefix(fmt.Sprint(v["Image"]), img.URL) {
				t.Errorf("round %d: Inserted, but the drive holds %q and Image is %v", round, src, v["Image"])
			} else if fi, err := os.Stat(src); err != nil || fi.Size() != int64(len(iso)) {
				t.Errorf("round %d: the drive's file %s is not the whole image: %v", round, src, err)
			}
		} else if src != "" {
			t.Errorf("round %d: not Inserted, but the drive holds %s", round, src)
		}
		_, bs := call(base, "GET", sys(2)+"/Bios/Settings", "")
		pending, _ := bs["Attributes"].(map[string]any)
		if q, ok := pending["QuietBoot"]; ok && q != (round%2 == 0) && q != prevQuiet {
			t.Errorf("round %d: pending QuietBoot %v, want %v, or %v as before", round, q, round%2 == 0, prevQuiet)
		}
		prevQuiet = pending["QuietBoot"]
		// Whatever was cut off can be done again, and ends clean.
		call(base, "POST", cd+"/Actions/VirtualMedia.EjectMedia", `{}`)
		if c, _ := call(base, "PATCH", sys(0), `{"Boot":{"BootSourceOverrideTarget":"None"}}`); c/100 != 2 {
			t.Errorf("round %d: resetting the override after the restart: %d", round, c)
		}
		t.Logf("round %d (killed after %v): override %v/%v, media inserted %v, QuietBoot pending %v",
			round, after, target, enabled, v["Inserted"], pending["QuietBoot"])
		cmd.Process.Kill()
		cmd.Wait()
	}
}
