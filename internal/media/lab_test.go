package media_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/digitalocean/go-libvirt"

	"github.com/bmlab/bmlab/internal/machine"
	"github.com/bmlab/bmlab/internal/media"
	"github.com/bmlab/bmlab/internal/redfish"
	"github.com/bmlab/bmlab/internal/testenv"
	"github.com/bmlab/bmlab/internal/virttest"
)

const bootTimeout = 90 * time.Second

// bmc is vbmcd in miniature: a model with an image cache over the lab's
// libvirt backend, served as Redfish on loopback.
type bmc struct {
	t     *testing.T
	svc   *machine.Service
	url   string
	cache *media.Cache
}

func newBMC(t *testing.T, lab *virttest.Lab) *bmc {
	t.Helper()
	cache, err := media.New(media.Config{Dir: filepath.Join(testenv.QemuDir(t), "media"), Log: testenv.Logger(t),
		Policy: media.Policy{AllowLoopback: true}}) // the test serves images on loopback
	if err != nil {
		t.Fatal(err)
	}
	svc := machine.NewService(lab.Backend, testenv.Logger(t), machine.WithImageFetcher(cache))
	srv := redfish.New(svc, testenv.Logger(t), redfish.WithCredentials("admin", "pw"))
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close)
	return &bmc{t: t, svc: svc, url: ts.URL, cache: cache}
}

func (b *bmc) call(method, path, body string) (int, string) {
	b.t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, _ := http.NewRequest(method, b.url+path, r)
	req.SetBasicAuth("admin", "pw")
	if body != "" || method == http.MethodPost || method == http.MethodPatch {
		req.Header.Set("Content-Type", "application/json") // a change names JSON, even without a body
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(out)
}

func (b *bmc) must(want int, method, path, body string) string {
	b.t.Helper()
	code, out := b.call(method, path, body)
	if code != want {
		b.t.Fatalf("%s %s: %d, want %d: %s", method, path, code, want, out)
	}
	return out
}

// serve serves a file on loopback and returns its URL.
func serve(t *testing.T, file, name string) string {
	t.Helper()
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.ServeFile(w, r, file)
	}))
	t.Cleanup(ts.Close)
	return ts.URL + "/" + name
}

// TestVirtualMediaOnRealQemu: insert → PATCH Cd Once → On boots the marker
// ISO (BIOS); after eject the next boot is the disk's; an insert into the
// running VM changes the live domain and its definition; eject keeps the
// drive.
func TestVirtualMediaOnRealQemu(t *testing.T) {
	lab := virttest.New(t, "vm-media-")
	vm := lab.NewVM(t, "bios", virttest.VMOptions{NoCD: true, DiskMarker: true})
	b := newBMC(t, lab)
	img := serve(t, testenv.MarkerISO(t), "boot-node.iso")
	mgr := "/redfish/v1/Managers/" + vm.ID
	cd := mgr + "/VirtualMedia/Cd"
	sys := "/redfish/v1/Systems/" + vm.ID

	b.must(http.StatusNoContent, "POST", cd+"/Actions/VirtualMedia.InsertMedia", `{"Image":"`+img+`"}`)
	b.must(http.StatusOK, "PATCH", sys, `{"Boot":{"BootSourceOverrideTarget":"Cd","BootSourceOverrideEnabled":"Once"}}`)
	b.must(http.StatusNoContent, "POST", sys+"/Actions/ComputerSystem.Reset", `{"ResetType":"On"}`)
	cdBoots := vm.WaitMarker(t, testenv.Marker, 0, bootTimeout)
	lab.WaitPower(t, vm.ID, machine.PowerOff, bootTimeout) // the marker halts

	// The media state comes from the domain: a fresh model over the same
	// libvirt sees it.
	m, _ := lab.Service.Get(vm.ID)
	if md := machine.MediaOf(m, machine.SlotCD); !md.Inserted || md.Image != img {
		t.Fatalf("the domain does not carry the media: %+v", md)
	}

	b.must(http.StatusNoContent, "POST", cd+"/Actions/VirtualMedia.EjectMedia", "")
	if x := lab.LiveXML(t, vm.Name, 2); !strings.Contains(x, "device='cdrom'") || strings.Contains(x, b.cache.Dir()) {
		t.Fatalf("after eject the definition must keep an empty CD drive:\n%s", x)
	}
	b.must(http.StatusOK, "PATCH", sys, `{"Boot":{"BootSourceOverrideTarget":"Cd","BootSourceOverrideEnabled":"Once"}}`)
	b.must(http.StatusNoContent, "POST", sys+"/Actions/ComputerSystem.Reset", `{"ResetType":"On"}`)
	vm.WaitMarker(t, testenv.DiskMarker, 0, bootTimeout) // an empty CD: the disk boots
	if c, _ := vm.Markers(); c != cdBoots {
		t.Fatalf("the ejected CD booted again")
	}

	// The VM runs (the disk marker stays at grub's prompt): insert live.
	b.must(http.StatusNoContent, "POST", cd+"/Actions/VirtualMedia.InsertMedia", `{"Image":"`+img+`"}`)
	live := lab.LiveXML(t, vm.Name, 0)
	persistent := lab.LiveXML(t, vm.Name, 2) // VIR_DOMAIN_XML_INACTIVE
	for what, x := range map[string]string{"live": live, "persistent": persistent} {
		if !strings.Contains(x, b.cache.Dir()) {
			t.Errorf("the %s definition does not hold the inserted image:\n%s", what, x)
		}
	}
	b.must(http.StatusNoContent, "POST", cd+"/Actions/VirtualMedia.EjectMedia", "{}")
	if x := lab.LiveXML(t, vm.Name, 0); strings.Contains(x, b.cache.Dir()) || !strings.Contains(x, "device='cdrom'") {
		t.Fatalf("live eject must empty the drive and keep it:\n%s", x)
	}
	b.must(http.StatusNoContent, "POST", sys+"/Actions/ComputerSystem.Reset", `{"ResetType":"ForceOff"}`)
}

// TestIronicFlowSushyUEFI1GiB is Ironic's redfish-virtual-media boot through
// python3-sushy (eject every member, insert with only Image, PATCH Cd Once,
// Reset On) with a 1 GiB image on a UEFI VM: the insert answers at once,
// power-on waits for the download, and the VM boots the image.
func TestIronicFlowSushyUEFI1GiB(t *testing.T) {
	lab := virttest.New(t, "vm-media-")
	py := testenv.Python(t, "sushy")
	vm := lab.NewVM(t, "uefi", virttest.VMOptions{NoCD: true, UEFI: true})
	b := newBMC(t, lab)

	// 1 GiB: the marker ISO padded with zeros (sparse on disk).
	big := filepath.Join(t.TempDir(), "big.iso")
	iso, err := os.ReadFile(testenv.MarkerISO(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(big, iso, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(big, 1<<30); err != nil {
		t.Fatal(err)
	}
	img := serve(t, big, "boot-"+vm.ID+".iso")

	start := time.Now()
	cmd := exec.Command(py, filepath.Join(testenv.RepoRoot(), "internal/redfish/testdata/sushy_vmedia.py"), b.url, "admin", "pw", vm.ID, img)
	out, err := cmd.CombinedOutput()
	t.Logf("sushy (%s):\n%s", time.Since(start).Round(time.Millisecond), out)
	if err != nil || !strings.Contains(string(out), "DONE") {
		t.Fatalf("sushy flow failed: %v", err)
	}
	vm.WaitMarker(t, testenv.Marker, 0, 150*time.Second)
	st := b.cache.Stats()
	t.Logf("cache after the flow: %d image(s), %d bytes", st.Images, st.Bytes)

	// The same image again: revalidated, not downloaded.
	lab.WaitPower(t, vm.ID, machine.PowerOff, bootTimeout)
	cd := "/redfish/v1/Managers/" + vm.ID + "/VirtualMedia/Cd"
	b.must(http.StatusNoContent, "POST", cd+"/Actions/VirtualMedia.EjectMedia", "")
	t0 := time.Now()
	b.must(http.StatusNoContent, "POST", cd+"/Actions/VirtualMedia.InsertMedia", `{"Image":"`+img+`"}`)
	t.Logf("second insert of the unchanged 1 GiB image: %s", time.Since(t0).Round(time.Millisecond))
	st2 := b.cache.Stats()
	if st2.Images != st.Images || st2.Bytes != st.Bytes || st2.Downloads != st.Downloads || st2.Hits != st.Hits+1 {
		t.Fatalf("cache on an unchanged image: %+v -> %+v; want one more hit and nothing else", st, st2)
	}
}

// TestRemovableMediaOnRealQemu: the Removable member is a USB stick. Insert
// plugs it into a running VM (live and in the definition), eject pulls it
// out, and a VM with nothing else to boot boots the marker image from it.
func TestRemovableMediaOnRealQemu(t *testing.T) {
	lab := virttest.New(t, "vm-usb-")
	ctx := context.Background()
	b := newBMC(t, lab)
	img := serve(t, testenv.MarkerISO(t), "stick.img")
	stick := func(id string) string { return "/redfish/v1/Managers/" + id + "/VirtualMedia/Removable" }

	// A running VM: plug, check, pull.
	run := lab.NewVM(t, "run", virttest.VMOptions{NoCD: true, DiskMarker: true})
	if err := lab.Service.Reset(ctx, run.ID, machine.ResetOn); err != nil {
		t.Fatal(err)
	}
	run.WaitMarker(t, testenv.DiskMarker, 0, bootTimeout)
	b.must(http.StatusNoContent, "POST", stick(run.ID)+"/Actions/VirtualMedia.InsertMedia", `{"Image":"`+img+`"}`)
	for what, flags := range map[string]int{"live": 0, "persistent": 2} {
		x := lab.LiveXML(t, run.Name, libvirt.DomainXMLFlags(flags))
		if !strings.Contains(x, "bus='usb'") || !strings.Contains(x, b.cache.Dir()) {
			t.Errorf("%s definition lacks the USB stick:\n%s", what, x)
		}
	}
	b.must(http.StatusNoContent, "POST", stick(run.ID)+"/Actions/VirtualMedia.EjectMedia", "")
	// libvirt may return from a live detach before qemu has finished the
	// unplug (it then completes on qemu's DEVICE_DELETED); under load that
	// takes a moment.
	var x string
	if !testenv.WaitFor(5*time.Second, func() bool { x = lab.LiveXML(t, run.Name, 0); return !strings.Contains(x, "bus='usb'") }) {
		t.Errorf("eject left the USB stick plugged in:\n%s", x)
	}

	// An off VM with no disk and an empty CD boots from the stick.
	boot := lab.NewVM(t, "boot", virttest.VMOptions{NoCD: true})
	b.must(http.StatusNoContent, "POST", stick(boot.ID)+"/Actions/VirtualMedia.InsertMedia", `{"Image":"`+img+`"}`)
	sys := "/redfish/v1/Systems/" + boot.ID
	b.must(http.StatusOK, "PATCH", sys, `{"Boot":{"BootSourceOverrideTarget":"Usb","BootSourceOverrideEnabled":"Once"}}`)
	b.must(http.StatusNoContent, "POST", sys+"/Actions/ComputerSystem.Reset", `{"ResetType":"On"}`)
	boot.WaitMarker(t, testenv.Marker, 0, bootTimeout)
}
