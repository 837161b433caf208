package vbmcd

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	kubevirtv1 "kubevirt.io/api/core/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"

	"github.com/bmlab/bmlab/internal/kubevirt"
	"github.com/bmlab/bmlab/internal/kubevirt/kubevirttest"
	"github.com/bmlab/bmlab/internal/testenv"
)

// sushyMedia is what testdata/sushy_vmedia.py prints of the CD member.
type sushyMedia struct {
	Inserted     bool
	Image        string
	ConnectedVia string `json:"connected_via"`
	Oem          struct{ Volume, AttachedAt string }
	Status       struct{ State, Health string }
}

// markerISOServer serves the marker ISO at every path on loopback, until
// the test ends.
func markerISOServer(t *testing.T) *httptest.Server {
	t.Helper()
	iso := testenv.MarkerISO(t)
	img := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { http.ServeFile(w, r, iso) }))
	t.Cleanup(img.Close)
	return img
}

// mediaStep runs one step of testdata/sushy_vmedia.py (python3-sushy)
// against system id as the daemon's admin and returns what it read.
func mediaStep(t *testing.T, url, id string, step ...string) sushyMedia {
	t.Helper()
	return adminStep[sushyMedia](t, "sushy_vmedia.py", url, id, step...)
}

// waitSerial waits up to bootTimeout for marker to stand in the serial
// log more than before times and returns how many times it does.
func waitSerial(t *testing.T, serial, marker string, before int) int {
	t.Helper()
	var n int
	if !testenv.WaitFor(bootTimeout, func() bool { n = testenv.Count(serial, marker); return n > before }) {
		t.Fatalf("marker %q did not appear within %s (count %d)", marker, bootTimeout, n)
	}
	return n
}

// TestE2EKubeVirtMedia: virtual media over KubeVirt with sushy, as
// Ironic's redfish-virtual-media boot does it, KubeVirt without
// DeclarativeHotplugVolumes. A VM without a CD drive shows the BMC's empty
// virtual drive; InsertMedia has CDI (played by the fixture) import the
// image from vbmcd's own image server into a DataVolume (labelled, owned by
// the VM, checked by CDI's CRD), the VM gets a SATA CD-ROM on it (KubeVirt's
// webhooks admit it), Once Cd + On boots the ISO (marker on the serial
// console), whose instance virt-controller holds back until the DataVolume
// is imported; the next start boots the disk; eject detaches it and
// deletes the DataVolume, whose image URL then answers 404. An insert into
// the running VM reads Inserted with ConnectedVia NotConnected (AttachedAt
// NextStart) until a cold restart makes an instance with it.
//
// The import runs outside the machine's lock: while CDI imports (held by
// the fixture) a Boot PATCH answers at once, an On is accepted (it waits
// for the medium, as on any backend), and an eject cancels the import and
// leaves no DataVolume. An import CDI keeps failing (its importer
// restarted MaxImportRestarts times) ends the insert with CDI's last
// message within seconds, and leaves no DataVolume. The Removable member
// is refused, saying why.
//
// The VM is not called node-0: its firmware UUID (derived from the name)
// would be that of TestE2EKubeVirt's VM, and libvirt holds one domain per
// UUID, should another run of that test be under way on the same libvirtd.
func TestE2EKubeVirtMedia(t *testing.T) {
	f := kubevirttest.Start(t, "lab", "e2e-kvm-")
	ctx := context.Background()
	vm := kubevirtVM(t, f.Namespace, "media-0", map[string]string{"bmlab.io/bmc": "yes"})
	s := &vm.Spec.Template.Spec
	s.Domain.Devices.Disks, s.Volumes = s.Domain.Devices.Disks[:1], s.Volumes[:1] // the disk, no CD
	kv := kubevirtREST(t, f, kubevirtv1.SchemeGroupVersion)
	cdi := kubevirtREST(t, f, cdiv1.SchemeGroupVersion)
	createVMs(t, kv, vm)
	vmUID := getVM(t, kv, f.Namespace, vm.Name).UID
	id := vmUUID(t, kv, vm)
	url := kubevirtDaemon(t, f, f.VBMCDKubeconfig(t, nil), func(c *Config) { c.KubeMediaAddr = "127.0.0.1:0" })
	img := markerISOServer(t)
	const user, pass = "admin", "e2e-pass"
	media := func(step ...string) sushyMedia { t.Helper(); return mediaStep(t, url, id, step...) }
	waitMedia := func(what string, ok func(sushyMedia) bool) sushyMedia {
		t.Helper()
		var m sushyMedia
		if !testenv.WaitFor(2*time.Minute, func() bool { m = media("show"); return ok(m) }) {
			t.Fatalf("virtual media: %s did not happen; CD member %+v", what, m)
		}
		return m
	}
	serial := f.SerialLog(vm.Name)
	waitMarker := func(marker string, before int) int { t.Helper(); return waitSerial(t, serial, marker, before) }
	ours := func() []cdiv1.DataVolume {
		t.Helper()
		l := &cdiv1.DataVolumeList{}
		if err := cdi.Get().Namespace(f.Namespace).Resource("datavolumes").Param("labelSelector", kubevirt.LabelMediaVM+"="+string(vmUID)).Do(ctx).Into(l); err != nil {
			t.Fatal(err)
		}
		return l.Items
	}
	cdDisk := func(vm *kubevirtv1.VirtualMachine) (kubevirtv1.Disk, *kubevirtv1.Volume) {
		for _, d := range vm.Spec.Template.Spec.Domain.Devices.Disks {
			if d.CDRom != nil {
				for _, v := range vm.Spec.Template.Spec.Volumes {
					if v.Name == d.Name {
						return d, &v
					}
				}
				return d, nil
			}
		}
		return kubevirtv1.Disk{}, nil
	}

	if m := media("show"); m.Inserted || m.ConnectedVia != "NotConnected" {
		t.Fatalf("before any insert: %+v, want the empty virtual drive", m)
	}

	// Insert while off: CDI imports from vbmcd's image server, the CD
	// takes the DataVolume.
	image := img.URL + "/boot.iso"
	media("insert", image)
	m := waitMedia("the insert", func(m sushyMedia) bool { return m.Inserted })
	if m.Image != image || m.ConnectedVia != "URI" || m.Oem.AttachedAt != "Now" || !strings.HasPrefix(m.Oem.Volume, "datavolumes/lab/media-0-bmc-cd-") {
		t.Errorf("after the insert: %+v", m)
	}
	dvs := ours()
	if len(dvs) != 1 {
		t.Fatalf("DataVolumes for the VM: %d, want 1", len(dvs))
	}
	dv := dvs[0]
	if dv.Status.Phase != cdiv1.Succeeded || dv.Status.Progress != "100.0%" {
		t.Errorf("DataVolume %s: phase %s progress %s, want Succeeded 100.0%%", dv.Name, dv.Status.Phase, dv.Status.Progress)
	}
	if o := dv.OwnerReferences; len(o) != 1 || o[0].UID != vmUID || o[0].Kind != "VirtualMachine" {
		t.Errorf("DataVolume owners %+v, want the VM", o)
	}
	if dv.Labels[kubevirt.LabelMedia] != "Cd" {
		t.Errorf("DataVolume labels %v", dv.Labels)
	}
	src := dv.Spec.Source.HTTP.URL
	if strings.HasPrefix(src, img.URL) {
		t.Errorf("the DataVolume imports from the client's URL %s, want vbmcd's image server", src)
	}
	d, v := cdDisk(getVM(t, kv, f.Namespace, vm.Name))
	if d.CDRom == nil || d.CDRom.Bus != kubevirtv1.DiskBusSATA || v == nil || v.DataVolume == nil || v.DataVolume.Name != dv.Name {
		t.Fatalf("the VM's CD: %+v volume %+v, want a SATA CD-ROM on DataVolume %s", d, v, dv.Name)
	}

	// Once Cd + On: the instance's domain boots the imported ISO.
	sushy(t, url, user, pass, id, "boot", "Cd", "Once", "Legacy")
	sushy(t, url, user, pass, id, "reset", "On")
	cd := waitMarker(testenv.Marker, 0)
	if m := media("show"); !m.Inserted || m.ConnectedVia != "URI" {
		t.Errorf("booted from the CD: %+v", m)
	}
	// The marker ISO powers off and the VM stays off; the next start
	// boots the disk.
	if !testenv.WaitFor(bootTimeout, func() bool { return sushy(t, url, user, pass, id, "show").Power == "Off" }) {
		t.Fatal("the VM did not read Off after its guest powered off")
	}
	sushy(t, url, user, pass, id, "reset", "On")
	waitMarker(testenv.DiskMarker, 0)
	if c := testenv.Count(serial, testenv.Marker); c != cd {
		t.Fatalf("the CD booted again after a spent Once override")
	}
	if m := media("show"); !m.Inserted || m.ConnectedVia != "URI" {
		t.Errorf("running with the CD: %+v", m)
	}

	// Eject: the template loses the CD, the DataVolume goes, and vbmcd no
	// longer serves the image.
	if m := media("eject"); m.Inserted {
		t.Errorf("after eject: %+v", m)
	}
	if !testenv.WaitFor(30*time.Second, func() bool {
		err := cdi.Get().Namespace(f.Namespace).Resource("datavolumes").Name(dv.Name).Do(ctx).Error()
		return apierrors.IsNotFound(err)
	}) {
		t.Fatalf("DataVolume %s still there after eject", dv.Name)
	}
	got := getVM(t, kv, f.Namespace, vm.Name)
	if d, _ := cdDisk(got); d.Name != "" {
		t.Errorf("the VM keeps CD %+v after eject", d)
	}
	if _, ok := got.Annotations[kubevirt.AnnotationMedia]; ok {
		t.Errorf("the VM keeps annotation %s after eject", kubevirt.AnnotationMedia)
	}
	if resp, err := http.Get(src); err != nil || resp.StatusCode != http.StatusNotFound {
		t.Errorf("the ejected image's URL: %v %v, want 404", resp, err)
	} else {
		resp.Body.Close()
	}

	// Insert while running: without DeclarativeHotplugVolumes KubeVirt
	// does not hot-plug CD-ROMs, so it is there from the next instance
	// on, and the member says so; a warm reset (ForceRestart) keeps the
	// instance, a PowerCycle makes a new one.
	media("insert", image)
	m = waitMedia("the insert while running", func(m sushyMedia) bool { return m.Inserted })
	if m.ConnectedVia != "NotConnected" || m.Oem.AttachedAt != "NextStart" {
		t.Errorf("inserted while running: %+v, want NotConnected, AttachedAt NextStart", m)
	}
	disk := testenv.Count(serial, testenv.DiskMarker)
	sushy(t, url, user, pass, id, "reset", "PowerCycle")
	waitMarker(testenv.DiskMarker, disk)
	waitMedia("the restarted instance's CD", func(m sushyMedia) bool { return m.Inserted && m.ConnectedVia == "URI" && m.Oem.AttachedAt == "Now" })
	sushy(t, url, user, pass, id, "reset", "ForceOff")
	media("eject")
	if !testenv.WaitFor(30*time.Second, func() bool { return len(ours()) == 0 }) {
		t.Fatalf("DataVolumes left after the eject: %d", len(ours()))
	}

	// The import runs outside the machine's lock. CDI is slow (the
	// fixture holds the import): the insert is under way, a Boot PATCH
	// answers at once, an On is accepted, and an eject cancels the import
	// and leaves no DataVolume.
	f.HoldImports(true)
	insertURL := url + "/redfish/v1/Managers/" + id + "/VirtualMedia/Cd/Actions/VirtualMedia.InsertMedia"
	if r, err := send("POST", insertURL, user, pass, `{"Image":"`+image+`"}`); err != nil || r.Code != http.StatusAccepted {
		t.Fatalf("insert while CDI is slow: %v %d %s, want 202 with a task", err, r.Code, r.Body)
	}
	if !testenv.WaitFor(30*time.Second, func() bool {
		dvs := ours()
		return len(dvs) == 1 && dvs[0].Status.Phase == cdiv1.ImportInProgress
	}) {
		t.Fatalf("no import in progress: %+v", ours())
	}
	began := time.Now()
	r, err := send("PATCH", url+"/redfish/v1/Systems/"+id, user, pass, `{"Boot":{"BootSourceOverrideTarget":"Cd","BootSourceOverrideEnabled":"Once"}}`)
	if err != nil || r.Code/100 != 2 {
		t.Fatalf("Boot PATCH during the import: %v %d %s", err, r.Code, r.Body)
	}
	if took := time.Since(began); took > 5*time.Second {
		t.Errorf("the Boot PATCH took %s during the import: it waited for the machine's lock", took)
	}
	t.Logf("Boot PATCH during the import answered in %s", time.Since(began).Round(time.Millisecond))
	if r, err := send("POST", url+"/redfish/v1/Systems/"+id+"/Actions/ComputerSystem.Reset", user, pass, `{"ResetType":"On"}`); err != nil || r.Code/100 != 2 {
		t.Fatalf("On during the import: %v %d %s", err, r.Code, r.Body)
	}
	began = time.Now()
	if m := media("eject"); m.Inserted {
		t.Errorf("after an eject during the import: %+v", m)
	}
	t.Logf("eject during the import answered in %s", time.Since(began).Round(time.Millisecond))
	if dvs := ours(); len(dvs) != 0 {
		t.Errorf("the eject during the import left DataVolumes: %+v", dvs)
	}
	f.HoldImports(false)
	sushy(t, url, user, pass, id, "reset", "ForceOff")

	// CDI keeps failing the import (its importer restarted each time):
	// 500 OperationFailed (the source is vbmcd's own server, the failure
	// is the service's) with CDI's message after MaxImportRestarts
	// restarts, from the action when the failure came within the insert
	// wait (1 s), else from the task monitor of its 202; the member warns,
	// holds nothing, and the failed DataVolume is deleted.
	f.FailImports("Unable to connect to http data source: the fixture refuses")
	began = time.Now()
	r, err = send("POST", insertURL, user, pass, `{"Image":"`+image+`"}`)
	if err == nil && r.Code == http.StatusAccepted {
		mon := url + r.Header.Get("Location")
		testenv.WaitFor(2*time.Minute, func() bool {
			r, err = send("GET", mon, user, pass, "")
			return err != nil || r.Code != http.StatusAccepted
		})
	}
	if err != nil || r.Code != http.StatusInternalServerError || !strings.Contains(string(r.Body), "the fixture refuses") ||
		!strings.Contains(string(r.Body), fmt.Sprintf("%d times", kubevirt.MaxImportRestarts)) {
		t.Errorf("insert with CDI failing: %v %d %s, want 500 with CDI's message after %d restarts", err, r.Code, r.Body, kubevirt.MaxImportRestarts)
	}
	// CDI restarts the fixture's importer every RetryEvery (a kubelet:
	// 10 s, 20 s, 40 s...): the insert ends after the restarts, not after
	// ImportWait (10 min).
	if took := time.Since(began); took > time.Duration(kubevirt.MaxImportRestarts+10)*kubevirttest.RetryEvery+20*time.Second {
		t.Errorf("the failing import ended after %s", took)
	}
	t.Logf("a failing import ended the insert after %s", time.Since(began).Round(time.Millisecond))
	if m := media("show"); m.Inserted || m.Status.Health != "Warning" {
		t.Errorf("after a failed import: %+v, want empty with Health Warning", m)
	}
	if !testenv.WaitFor(30*time.Second, func() bool { return len(ours()) == 0 }) {
		t.Fatalf("the failed DataVolume was not deleted: %d left", len(ours()))
	}
	if d, _ := cdDisk(getVM(t, kv, f.Namespace, vm.Name)); d.Name != "" {
		t.Errorf("a failed import left CD %+v on the VM", d)
	}

	f.FailImports("")

	// The Removable member: KubeVirt hot-plugs disks on scsi or virtio
	// only, so there is no USB stick; refused, saying why.
	r, err = send("POST", url+"/redfish/v1/Managers/"+id+"/VirtualMedia/Removable/Actions/VirtualMedia.InsertMedia", user, pass, `{"Image":"`+image+`"}`)
	if err != nil || r.Code/100 == 2 || !strings.Contains(string(r.Body), "scsi or virtio") {
		t.Errorf("insert into Removable: %v %d %s, want a refusal that says why", err, r.Code, r.Body)
	}
}

// TestE2EKubeVirtMediaHotplug: with DeclarativeHotplugVolumes in the
// KubeVirt CR, a CD inserted into a running VM (sushy, as Ironic) goes in
// live and an eject takes it out live, without a restart, and the guest
// sees both. KubeVirt's VM controller hot-plugs the DataVolume into the
// instance's spec, virt-controller runs its attachment pod, the fixture's
// virt-handler reports the volume Ready and puts the file into the running
// libvirt domain's CD-ROM (its live XML), and the member reads Inserted,
// URI, AttachedAt Now; after the eject the instance has no such volume and
// the domain's CD-ROM is empty. The instance is the same throughout. The
// guest is UEFI firmware at its shell (OVMF's EFI Internal Shell, reached
// because the VM's disk is blank): its `map -r` lists no CD file system
// before the insert, the inserted ISO's file system (a CDROM device path,
// the ISO's efi directory) after it, and none again after the eject.
func TestE2EKubeVirtMediaHotplug(t *testing.T) {
	f := kubevirttest.Start(t, "lab", "e2e-kvh-", kubevirttest.WithFeatureGates("DeclarativeHotplugVolumes"))
	vm := kubevirtVM(t, f.Namespace, "hotplug-0", map[string]string{"bmlab.io/bmc": "yes"})
	s := &vm.Spec.Template.Spec
	s.Domain.Devices.Disks, s.Volumes = s.Domain.Devices.Disks[:1], s.Volumes[:1] // the disk, no CD
	uefiShellGuest(t, s)
	kv := kubevirtREST(t, f, kubevirtv1.SchemeGroupVersion)
	createVMs(t, kv, vm)
	id := vmUUID(t, kv, vm)
	url := kubevirtDaemon(t, f, f.VBMCDKubeconfig(t, nil), func(c *Config) { c.KubeMediaAddr = "127.0.0.1:0" })
	img := markerISOServer(t)
	const user, pass = "admin", "e2e-pass"
	media := func(step ...string) sushyMedia { t.Helper(); return mediaStep(t, url, id, step...) }
	serial := f.SerialLog(vm.Name)

	// vbmcd gives the VM the BMC's empty CD drive before it starts it, so
	// the instance has a drive to hot-plug into.
	sushy(t, url, user, pass, id, "reset", "On")
	if !testenv.WaitFor(bootTimeout, func() bool { return testenv.Count(serial, "Shell>") > 0 }) {
		b, _ := os.ReadFile(serial)
		t.Fatalf("the guest did not reach the UEFI shell within %s; its console:\n%s", bootTimeout, b[max(0, len(b)-2000):])
	}
	shell := uefiShell(t, f.DomainName(vm.Name), serial)
	vmi := getVMI(t, kv, f.Namespace, vm.Name)
	instance := vmi.UID
	if !slices.ContainsFunc(vmi.Spec.Domain.Devices.Disks, func(d kubevirtv1.Disk) bool { return d.Name == "bmc-cd" && d.CDRom != nil }) {
		t.Fatalf("the instance has no BMC CD drive: %+v", vmi.Spec.Domain.Devices.Disks)
	}
	domainCD := func() string {
		t.Helper()
		x, err := exec.Command("virsh", "-c", "qemu:///system", "dumpxml", f.DomainName(vm.Name)).CombinedOutput()
		if err != nil {
			t.Fatalf("virsh dumpxml: %v %s", err, x)
		}
		i := strings.Index(string(x), "device='cdrom'")
		if i < 0 {
			t.Fatalf("the domain has no CD-ROM:\n%s", x)
		}
		rest := string(x)[i:]
		rest = rest[:strings.Index(rest, "</disk>")]
		if j := strings.Index(rest, "<source file='"); j >= 0 {
			src := rest[j+len("<source file='"):]
			return src[:strings.Index(src, "'")]
		}
		return ""
	}
	if src := domainCD(); src != "" {
		t.Fatalf("the running domain's CD holds %q before any insert", src)
	}
	if m := shell("map -r"); strings.Contains(m, "CDROM(") {
		t.Fatalf("the guest sees a CD before any insert:\n%s", m)
	}

	media("insert", img.URL+"/boot.iso")
	var m sushyMedia
	if !testenv.WaitFor(2*time.Minute, func() bool { m = media("show"); return m.Inserted && m.ConnectedVia == "URI" }) {
		t.Fatalf("the live insert did not connect: %+v", m)
	}
	if m.Oem.AttachedAt != "Now" {
		t.Errorf("inserted live: %+v, want AttachedAt Now", m)
	}
	vmi = getVMI(t, kv, f.Namespace, vm.Name)
	var st *kubevirtv1.VolumeStatus
	for i := range vmi.Status.VolumeStatus {
		if vmi.Status.VolumeStatus[i].Name == "bmc-cd" {
			st = &vmi.Status.VolumeStatus[i]
		}
	}
	if st == nil || st.Phase != kubevirtv1.VolumeReady || st.HotplugVolume == nil {
		t.Errorf("the instance's volume status of the CD: %+v, want a hot-plugged volume, Ready", st)
	}
	if src := domainCD(); !strings.HasPrefix(filepath.Base(src), "dv-hotplug-0-bmc-cd-") {
		t.Errorf("the running domain's CD holds %q, want the imported DataVolume", src)
	}
	if vmi.UID != instance {
		t.Errorf("the insert replaced the instance")
	}
	t.Logf("hot-plugged: %s in the running domain's CD-ROM, volume %s", domainCD(), st.Phase)
	// The guest sees the medium: a file system on the CD (the firmware
	// rescans its devices on map -r), and the ISO's files on it.
	var seen string
	if !testenv.WaitFor(time.Minute, func() bool { seen = shell("map -r"); return strings.Contains(seen, "CDROM(") }) {
		t.Fatalf("the guest does not see the inserted CD; its last map -r:\n%s", seen)
	}
	if ls := shell(`ls fs0:\`); !strings.Contains(ls, "efi") {
		t.Errorf("the guest's listing of the CD has no efi directory:\n%s", ls)
	}
	t.Logf("the guest's map -r after the insert:\n%s", seen)

	if m := media("eject"); m.Inserted {
		t.Errorf("after the live eject: %+v", m)
	}
	vmi = getVMI(t, kv, f.Namespace, vm.Name)
	if slices.ContainsFunc(vmi.Spec.Volumes, func(v kubevirtv1.Volume) bool { return v.Name == "bmc-cd" }) {
		t.Errorf("the instance keeps the CD's volume after the eject")
	}
	if src := domainCD(); src != "" {
		t.Errorf("the running domain's CD holds %q after the eject", src)
	}
	if !testenv.WaitFor(time.Minute, func() bool { seen = shell("map -r"); return !strings.Contains(seen, "CDROM(") }) {
		t.Errorf("the guest still sees a CD after the eject; its last map -r:\n%s", seen)
	}
	if vmi.UID != instance {
		t.Errorf("the eject replaced the instance")
	}
}

// uefiShell returns a function that types a command into the UEFI shell
// of the running libvirt domain (through its serial console's pty) and
// returns what the shell printed until its next prompt, read from the
// console's log, without terminal control sequences.
func uefiShell(t *testing.T, domain, serial string) func(cmd string) string {
	t.Helper()
	out, err := exec.Command("virsh", "-c", "qemu:///system", "ttyconsole", domain).CombinedOutput()
	if err != nil {
		t.Fatalf("virsh ttyconsole %s: %v %s", domain, err, out)
	}
	pty, err := os.OpenFile(strings.TrimSpace(string(out)), os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pty.Close() })
	read := func() string { b, _ := os.ReadFile(serial); return string(b) }
	return func(cmd string) string {
		t.Helper()
		from := len(read())
		// qemu's UART takes from the pty only what its FIFO has room for:
		// nothing typed is lost while the firmware is busy.
		if _, err := pty.Write([]byte(cmd + "\r")); err != nil {
			t.Fatal(err)
		}
		var got string
		if !testenv.WaitFor(time.Minute, func() bool {
			got = read()[from:]
			return strings.Contains(got, "Shell>") // the prompt comes back when the command is done
		}) {
			t.Fatalf("the UEFI shell did not answer %q; it printed:\n%s", cmd, got)
		}
		return ansi.ReplaceAllString(got, "")
	}
}

// ansi matches the terminal control sequences the UEFI shell prints.
var ansi = regexp.MustCompile(`\x1b\[[0-9;?]*[A-Za-z]`)

// uefiShellGuest gives the VM a blank disk and UEFI without secure boot:
// OVMF finds nothing to boot and starts its shell, a guest a test can ask
// what it sees. (Not for a test that boots the marker disk: with a blank
// disk OVMF falls through to the next boot option, the CD.)
func uefiShellGuest(t *testing.T, s *kubevirtv1.VirtualMachineInstanceSpec) {
	t.Helper()
	blank := testenv.QemuDir(t) + "/blank.img"
	if err := os.WriteFile(blank, make([]byte, 1<<20), 0o666); err != nil {
		t.Fatal(err)
	}
	s.Volumes[0].HostDisk.Path = blank
	off := false
	s.Domain.Firmware = &kubevirtv1.Firmware{Bootloader: &kubevirtv1.Bootloader{EFI: &kubevirtv1.EFI{SecureBoot: &off}}}
}
