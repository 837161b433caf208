package vbmcd

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bmlab/bmlab/internal/ipmi/client"
	"github.com/bmlab/bmlab/internal/ipmi/wire"
	"github.com/bmlab/bmlab/internal/testenv"
	"github.com/bmlab/bmlab/internal/virt"
	"github.com/bmlab/bmlab/internal/virttest"
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
	call := func(base, method, path, body string) (int, map[string]any) {
		r, err := send(method, base+path, "admin", "kill-pass-1", body)
		if err != nil {
			return 0, nil
		}
		return r.Code, r.object()
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

		// Restarted: one state or the other, as libvirt itself says. A
		// change libvirtd received just before the kill may land after the
		// new vbmcd read the domain; vbmcd then follows libvirt's event, so
		// the two must agree within a moment, and stay so.
		cmd, base = start()
		var target, enabled any
		var def string
		if !testenv.WaitFor(2*time.Second, func() bool {
			_, b := call(base, "GET", sys(0), "")
			boot, _ := b["Boot"].(map[string]any)
			target, enabled = boot["BootSourceOverrideTarget"], boot["BootSourceOverrideEnabled"]
			def = lab.LiveXML(t, vms[0].Name, libvirt.DomainXMLInactive)
			return (target == "Cd") == strings.Contains(def, "<boot dev='cdrom'/>")
		}) {
			t.Errorf("round %d: the model says %v, the definition's boot order disagrees:\n%s", round, target, def)
		}
		if !(target == "Cd" && enabled == "Once") && !(target == "None" && enabled == "Disabled") {
			t.Errorf("round %d: boot override %v/%v, want Cd/Once or None/Disabled", round, target, enabled)
		}
		var v map[string]any
		src, problem := "", ""
		if !testenv.WaitFor(2*time.Second, func() bool {
			_, v = call(base, "GET", cd, "")
			// The drive as libvirt has it now (not this test's own view,
			// which follows libvirt's events).
			src = ""
			if m := regexp.MustCompile(`<disk type='file' device='cdrom'>\s*<driver[^>]*/>\s*<source file='([^']*)'`).FindStringSubmatch(lab.LiveXML(t, vms[1].Name, libvirt.DomainXMLInactive)); m != nil {
				src = m[1]
			}
			problem = ""
			if inserted, _ := v["Inserted"].(bool); inserted {
				// In the drive whole, and the member names the URL.
				if src == "" || !strings.HasPrefix(fmt.Sprint(v["Image"]), img.URL) {
					problem = fmt.Sprintf("Inserted, but the drive holds %q and Image is %v", src, v["Image"])
				} else if fi, err := os.Stat(src); err != nil || fi.Size() != int64(len(iso)) {
					problem = fmt.Sprintf("the drive's file %s is not the whole image: %v", src, err)
				}
			} else if src != "" {
				problem = "not Inserted, but the drive holds " + src
			}
			return problem == ""
		}) {
			t.Errorf("round %d: %s", round, problem)
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

// readers are goroutines that each call their read over and over until
// stop, which waits for them to end; they stop when the test ends too,
// should a failure end it first.
type readers struct {
	done chan struct{}
	once sync.Once
	wg   sync.WaitGroup
}

func newReaders(t testing.TB) *readers {
	r := &readers{done: make(chan struct{})}
	t.Cleanup(r.stop)
	return r
}

// add starts a goroutine that calls read until stop.
func (r *readers) add(read func()) {
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		for {
			select {
			case <-r.done:
				return
			default:
				read()
			}
		}
	}()
}

func (r *readers) stop() {
	r.once.Do(func() { close(r.done) })
	r.wg.Wait()
}

// TestE2ELibvirtdRestartUnderLoad: a host's libvirtd crashes (SIGKILL) and
// comes back while clients read over Redfish and IPMI. Every read is
// answered, from the last known state during the outage; changes answer
// 503 with Retry-After and a Base message (IPMI: D3h); within 2 s of
// libvirtd's return the service is whole, and nothing was lost: the
// running VM still runs, the boot override set before is still there.
func TestE2ELibvirtdRestartUnderLoad(t *testing.T) {
	mh := newMultiHost(t, "e2e-lvr-")
	run := mh.vms[0] // on alpha, the host that restarts
	off := mh.labs[0].NewVM(t, "alpha-off", virttest.VMOptions{NoCD: true})
	sysPath := func(id string) string { return "/redfish/v1/Systems/" + id }
	patch := func(id, body string) (int, string, map[string]any) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPatch, mh.url+sysPath(id), strings.NewReader(body))
		req.SetBasicAuth("admin", "e2e-pass")
		req.Header.Set("Content-Type", "application/json")
		resp, err := mh.client.Do(req)
		if err != nil {
			t.Fatalf("PATCH: %v", err)
		}
		defer resp.Body.Close()
		var v map[string]any
		json.NewDecoder(resp.Body).Decode(&v)
		return resp.StatusCode, resp.Header.Get("Retry-After"), v
	}
	if !testenv.WaitFor(5*time.Second, func() bool { c, _, _ := mh.get(t, off.ID); return c == http.StatusOK }) {
		t.Fatalf("vbmcd does not serve %s", off.Name)
	}
	if c, _, b := mh.post(t, sysPath(run.ID)+"/Actions/ComputerSystem.Reset", `{"ResetType":"On"}`); c != http.StatusNoContent {
		t.Fatalf("Reset On: %d %v", c, b)
	}
	mh.waitState(t, 0, libvirt.DomainRunning)
	const override = `{"Boot":{"BootSourceOverrideTarget":"Pxe","BootSourceOverrideEnabled":"Continuous"}}`
	if c, _, b := patch(off.ID, override); c/100 != 2 {
		t.Fatalf("PATCH boot: %d %v", c, b)
	}

	// The load: four Redfish readers over both VMs, one IPMI reader with a
	// session per query, until stop.
	type tally struct {
		mu                      sync.Mutex
		ok, failed, unavailable int
		slowest                 time.Duration
		errs                    []string
	}
	var rf, ipmiReads tally
	note := func(tl *tally, ok bool, unavailable bool, took time.Duration, what string) {
		tl.mu.Lock()
		defer tl.mu.Unlock()
		if ok {
			tl.ok++
		} else {
			tl.failed++
			if len(tl.errs) < 5 {
				tl.errs = append(tl.errs, what)
			}
		}
		if unavailable {
			tl.unavailable++
		}
		tl.slowest = max(tl.slowest, took)
	}
	rs := newReaders(t)
	for i := range 4 {
		id := []string{run.ID, off.ID}[i%2]
		rs.add(func() {
			start := time.Now()
			req, _ := http.NewRequest(http.MethodGet, mh.url+sysPath(id), nil)
			req.SetBasicAuth("admin", "e2e-pass")
			resp, err := mh.client.Do(req)
			if err != nil {
				note(&rf, false, false, time.Since(start), err.Error())
				return
			}
			var v struct{ Status struct{ State string } }
			json.NewDecoder(resp.Body).Decode(&v)
			resp.Body.Close()
			note(&rf, resp.StatusCode == http.StatusOK, v.Status.State == "UnavailableOffline", time.Since(start), resp.Status)
		})
	}
	bmc := "127.0.0.1:" + strconv.Itoa(mh.ports[0])
	ipmiDo := func(cmd uint8, data ...byte) (wire.CompletionCode, error) {
		c, err := client.Dial(context.Background(), bmc, client.Config{Username: "admin", Password: "e2e-pass", Timeout: 2 * time.Second})
		if err != nil {
			return 0, err
		}
		defer c.Close()
		code, _, err := c.Do(wire.NetFnChassis, cmd, data...)
		return code, err
	}
	rs.add(func() {
		start := time.Now()
		code, err := ipmiDo(0x01) // Get Chassis Status
		note(&ipmiReads, err == nil && code == wire.CodeOK, false, time.Since(start), fmt.Sprint(code, err))
	})
	time.Sleep(time.Second)

	killed := time.Now()
	mh.hosts[0].Kill(t)
	if !testenv.WaitFor(time.Second, func() bool {
		_, _, b := mh.get(t, run.ID)
		st, _ := b["Status"].(map[string]any)
		return st["State"] == "UnavailableOffline"
	}) {
		t.Fatalf("%s not shown unavailable 1 s after libvirtd was killed", run.Name)
	}
	t.Logf("shown unavailable %v after the kill", time.Since(killed).Round(time.Millisecond))
	// Changes are refused, with what to do.
	if c, retry, b := mh.post(t, sysPath(off.ID)+"/Actions/ComputerSystem.Reset", `{"ResetType":"On"}`); c != http.StatusServiceUnavailable || retry == "" || !strings.Contains(fmt.Sprint(b), "ServiceTemporarilyUnavailable") {
		t.Errorf("Reset during the outage: %d Retry-After %q %v", c, retry, b)
	}
	if c, retry, b := patch(off.ID, `{"Boot":{"BootSourceOverrideTarget":"Hdd"}}`); c != http.StatusServiceUnavailable || retry == "" || !strings.Contains(fmt.Sprint(b), "Base.1.") {
		t.Errorf("PATCH during the outage: %d Retry-After %q %v", c, retry, b)
	}
	if code, err := ipmiDo(0x02, 0x00); err != nil || code != wire.CodeDestinationUnavail { // Chassis Control: power down
		t.Errorf("IPMI power off during the outage: %v %v, want D3h", code, err)
	}
	time.Sleep(time.Second) // the outage goes on under load

	mh.hosts[0].Start(t)
	back := time.Now()
	var whole time.Duration
	if !testenv.WaitFor(2*time.Second, func() bool {
		c, _, b := mh.post(t, sysPath(off.ID)+"/Actions/ComputerSystem.Reset", `{"ResetType":"On"}`)
		if c == http.StatusServiceUnavailable {
			return false
		}
		if c != http.StatusNoContent {
			t.Fatalf("Reset after libvirtd's return: %d %v", c, b)
		}
		whole = time.Since(back)
		return true
	}) {
		t.Fatalf("changes still refused 2 s after libvirtd answered again")
	}
	t.Logf("whole again %v after libvirtd answered (a change accepted)", whole.Round(time.Millisecond))
	mh.waitState(t, 0, libvirt.DomainRunning) // the running VM kept running
	var got libvirt.DomainState
	if !testenv.WaitFor(10*time.Second, func() bool { got = mh.labs[0].DomainState(t, off.Name); return got == libvirt.DomainRunning }) {
		t.Errorf("%s in state %d after the Reset that was accepted", off.Name, got)
	}
	time.Sleep(500 * time.Millisecond)
	rs.stop()

	_, _, b := mh.get(t, off.ID)
	if boot, _ := b["Boot"].(map[string]any); boot["BootSourceOverrideTarget"] != "Pxe" || boot["BootSourceOverrideEnabled"] != "Continuous" {
		t.Errorf("the boot override set before the restart is now %v/%v", boot["BootSourceOverrideTarget"], boot["BootSourceOverrideEnabled"])
	}
	if _, _, b := mh.get(t, run.ID); b["PowerState"] != "On" {
		t.Errorf("%s reads %v after the restart, want On", run.Name, b["PowerState"])
	}
	t.Logf("Redfish reads: %d answered (%d from the last known state during the outage), %d failed, slowest %v",
		rf.ok, rf.unavailable, rf.failed, rf.slowest.Round(time.Millisecond))
	t.Logf("IPMI reads (a session each): %d answered, %d failed, slowest %v", ipmiReads.ok, ipmiReads.failed, ipmiReads.slowest.Round(time.Millisecond))
	if rf.failed > 0 || ipmiReads.failed > 0 {
		t.Errorf("reads failed under the restart: Redfish %v, IPMI %v", rf.errs, ipmiReads.errs)
	}
	if rf.unavailable == 0 || ipmiReads.ok == 0 {
		t.Errorf("no reads during the outage: the test did not load the daemon")
	}
}

// TestE2EMediaDiskFull: the media directory's file system runs out of
// room (a small tmpfs; vbmcd leaves 64 MiB free on it). An image whose
// length is known and does not fit is refused at once: 507
// InsufficientStorage naming the directory. A disk that something else
// fills while an image downloads ends the insert in Exception, saying so.
// Either way nothing is half attached or left in the cache, and once there
// is room the same insert works and the VM boots it.
func TestE2EMediaDiskFull(t *testing.T) {
	testenv.Root(t)
	iso, err := os.ReadFile(testenv.MarkerISO(t))
	if err != nil {
		t.Fatal(err)
	}
	dir := testenv.QemuDir(t)
	// Room for the image, the 64 MiB vbmcd leaves free, and 8 MiB more.
	size := len(iso) + 72<<20
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", fmt.Sprintf("size=%d,mode=0777", size), "tmpfs", dir).CombinedOutput(); err != nil {
		t.Fatalf("mount a tmpfs: %v\n%s", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", dir).Run() })
	// A libvirtd of its own, started after the mount: its mount namespace
	// is a copy of this one with the tmpfs in it (the system libvirtd's
	// namespace was copied before, and mounts here do not reach it).
	host := virttest.NewUnderlay(t, "full", 0)
	lab := virttest.NewAt(t, host.URI, "e2e-full-")
	vm := lab.NewVM(t, "a", virttest.VMOptions{NoCD: true, DiskMarker: true})
	filler := filepath.Join(dir, "filler")
	url := daemon(t, "e2e-full-", func(c *Config) { c.MediaDir, c.Libvirt = dir, []virt.Host{{URI: host.URI}} })
	// /sized.iso has a Content-Length. /fills.iso is sent without one, and
	// halfway through, another writer fills the disk (fillerWritten closes
	// once it is done: vbmcd may give up before, and space held by the open
	// file is only freed once it is closed and removed).
	fillerWritten := make(chan struct{})
	var fillOnce sync.Once
	img := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/sized") {
			w.Header().Set("Content-Length", fmt.Sprint(len(iso)))
			w.Write(iso)
			return
		}
		for off := 0; off < len(iso); off += 1 << 20 {
			if off >= len(iso)/2 && strings.HasPrefix(r.URL.Path, "/fills") {
				fillOnce.Do(func() { fillDisk(filler); close(fillerWritten) })
			}
			if _, err := w.Write(iso[off:min(off+1<<20, len(iso))]); err != nil {
				return
			}
			w.(http.Flusher).Flush()
		}
	}))
	defer img.Close()
	call := func(method, path, body string) (int, map[string]any) {
		t.Helper()
		r, err := send(method, url+path, "admin", "e2e-pass", body)
		if err != nil {
			t.Fatal(err)
		}
		return r.Code, r.object()
	}
	cd := "/redfish/v1/Managers/" + vm.ID + "/VirtualMedia/Cd"
	// insert returns how an insert ended: Completed or Exception, whether
	// it was answered at once (204, or the error) or by its task (202), and
	// the messages.
	insert := func(name string) (int, string, string) {
		t.Helper()
		code, v := call("POST", cd+"/Actions/VirtualMedia.InsertMedia", `{"Image":"`+img.URL+"/"+name+`"}`)
		switch code {
		case http.StatusNoContent:
			return code, "Completed", ""
		case http.StatusAccepted:
		default:
			b, _ := json.Marshal(v)
			return code, "Exception", string(b)
		}
		task, _ := v["@odata.id"].(string)
		var tk map[string]any
		if !testenv.WaitFor(30*time.Second, func() bool {
			_, tk = call("GET", task, "")
			return tk["TaskState"] != "Running" && tk["TaskState"] != "New"
		}) {
			t.Fatalf("the insert task is still %v after 30 s", tk["TaskState"])
		}
		st, _ := tk["TaskState"].(string)
		b, _ := json.Marshal(tk["Messages"])
		return code, st, string(b)
	}
	nothingLeft := func(what string) {
		t.Helper()
		if _, v := call("GET", cd, ""); v["Inserted"] != false || (v["Image"] != nil && v["Image"] != "") {
			t.Errorf("%s: the member reads Inserted %v, Image %v", what, v["Inserted"], v["Image"])
		}
		if x := lab.LiveXML(t, vm.Name, libvirt.DomainXMLInactive); strings.Contains(x, dir) {
			t.Errorf("%s: an image is in the domain:\n%s", what, x)
		}
		filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
			if err == nil && !d.IsDir() && p != filler && d.Name() != "index.json" { // the cache's own index stays
				t.Errorf("%s: %s is left in the cache", what, p)
			}
			return nil
		})
	}

	// 16 MiB taken: the known-length image does not fit beside the 64 MiB.
	if err := os.WriteFile(filler, make([]byte, 16<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, _, body := insert("sized.iso"); code != http.StatusInsufficientStorage || !strings.Contains(body, "InsufficientStorage") || !strings.Contains(body, dir) {
		t.Errorf("insert of a sized image that does not fit: %d %s; want 507 InsufficientStorage naming the media directory", code, body)
	}
	nothingLeft("after the refused image")
	os.Remove(filler)

	// Answered at once (507) when the download ends within the action's
	// wait, else by the task: either way an error that says why.
	code, state, msg := insert("fills.iso")
	if (code != http.StatusAccepted && code != http.StatusInsufficientStorage) || state != "Exception" || !strings.Contains(msg, "disk full") || !strings.Contains(msg, dir) {
		t.Errorf("insert while the disk fills: %d, %s, messages %s; want an Exception naming the full media directory", code, state, msg)
	}
	t.Logf("answered %d: %s", code, msg)
	select {
	case <-fillerWritten:
	case <-time.After(30 * time.Second):
		t.Fatal("the writer filling the disk never finished")
	}
	nothingLeft("after the disk filled")

	// Room again: the insert completes and the VM boots the image.
	os.Remove(filler)
	if code, state, msg := insert("again.iso"); state != "Completed" {
		t.Fatalf("insert with room: %d %s %s", code, state, msg)
	}
	if code, v := call("PATCH", "/redfish/v1/Systems/"+vm.ID, `{"Boot":{"BootSourceOverrideTarget":"Cd","BootSourceOverrideEnabled":"Once"}}`); code/100 != 2 {
		t.Fatalf("PATCH boot: %d %v", code, v)
	}
	if code, v := call("POST", "/redfish/v1/Systems/"+vm.ID+"/Actions/ComputerSystem.Reset", `{"ResetType":"On"}`); code != http.StatusNoContent {
		t.Fatalf("Reset On: %d %v", code, v)
	}
	vm.WaitMarker(t, testenv.Marker, 0, bootTimeout)
}

// fillDisk writes to path until the file system is full (ENOSPC), then closes it.
func fillDisk(path string) {
	f, err := os.Create(path)
	if err != nil {
		return
	}
	defer f.Close()
	for {
		if _, err := f.Write(make([]byte, 1<<20)); err != nil {
			return
		}
	}
}
