package vbmcd

import (
	"context"
	"net/http"
	"net/http/httptest"
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

// TestE2EKubeVirtMedia: virtual media over KubeVirt with sushy, as
// Ironic's redfish-virtual-media boot does it. A VM without a CD drive
// shows the BMC's empty virtual drive; InsertMedia has CDI (played by the
// fixture) import the image from vbmcd's own image server into a
// DataVolume (labelled, owned by the VM, checked by CDI's CRD), the VM
// gets a SATA CD-ROM on it, Once Cd + On boots the ISO (marker on the
// serial console) and the next instance the disk; eject detaches it and
// deletes the DataVolume, whose image URL then answers 404. An insert
// into the running VM reads Inserted with ConnectedVia NotConnected
// (AttachedAt NextStart) until a restart makes an instance with it. An
// import CDI fails fails the insert and leaves no DataVolume.
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
	kv, err := kubevirt.NewRESTClient(f.API.RestConfig(), kubevirtv1.SchemeGroupVersion)
	if err != nil {
		t.Fatal(err)
	}
	cdi, err := kubevirt.NewRESTClient(f.API.RestConfig(), cdiv1.SchemeGroupVersion)
	if err != nil {
		t.Fatal(err)
	}
	if err := kv.Post().Namespace(f.Namespace).Resource("virtualmachines").Body(vm).Do(ctx).Error(); err != nil {
		t.Fatalf("create VirtualMachine: %v", err)
	}
	vmUID := getVM(t, kv, f.Namespace, vm.Name).UID
	id := kubevirt.FirmwareUUID(vm)
	url := kubevirtDaemon(t, f, f.VBMCDKubeconfig(t, nil), func(c *Config) { c.KubeMediaAddr = "127.0.0.1:0" })
	iso := testenv.MarkerISO(t)
	img := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { http.ServeFile(w, r, iso) }))
	defer img.Close()
	const user, pass = "admin", "e2e-pass"
	media := func(step ...string) sushyMedia {
		t.Helper()
		var m sushyMedia
		runSushy(t, "sushy_vmedia.py", url, user, pass, id, step, &m)
		return m
	}
	waitMedia := func(what string, ok func(sushyMedia) bool) sushyMedia {
		t.Helper()
		var m sushyMedia
		if !testenv.WaitFor(2*time.Minute, func() bool { m = media("show"); return ok(m) }) {
			t.Fatalf("virtual media: %s did not happen; CD member %+v", what, m)
		}
		return m
	}
	serial := f.SerialLog(vm.Name)
	waitMarker := func(marker string, before int) int {
		t.Helper()
		var n int
		if !testenv.WaitFor(bootTimeout, func() bool { n = testenv.Count(serial, marker); return n > before }) {
			t.Fatalf("marker %q did not appear within %s (count %d)", marker, bootTimeout, n)
		}
		return n
	}
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
	// The marker ISO powers off; the next instance boots the disk.
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

	// Insert while running: KubeVirt does not hot-plug CD-ROMs, so it is
	// there from the next instance on, and the member says so.
	media("insert", image)
	m = waitMedia("the insert while running", func(m sushyMedia) bool { return m.Inserted })
	if m.ConnectedVia != "NotConnected" || m.Oem.AttachedAt != "NextStart" {
		t.Errorf("inserted while running: %+v, want NotConnected, AttachedAt NextStart", m)
	}
	disk := testenv.Count(serial, testenv.DiskMarker)
	sushy(t, url, user, pass, id, "reset", "ForceRestart")
	waitMarker(testenv.DiskMarker, disk)
	waitMedia("the restarted instance's CD", func(m sushyMedia) bool { return m.Inserted && m.ConnectedVia == "URI" && m.Oem.AttachedAt == "Now" })
	sushy(t, url, user, pass, id, "reset", "ForceOff")
	media("eject")
	if !testenv.WaitFor(30*time.Second, func() bool { return len(ours()) == 0 }) {
		t.Fatalf("DataVolumes left after the eject: %d", len(ours()))
	}

	// CDI fails the import: 500 OperationFailed (the source is vbmcd's own
	// server, the failure is the service's) with CDI's message, from the
	// action when the failure came within the insert wait (1 s), else from
	// the task monitor of its 202; the member warns, holds nothing, and
	// the failed DataVolume is deleted.
	f.FailImports("Unable to connect to http data source: the fixture refuses")
	r, err := send("POST", url+"/redfish/v1/Managers/"+id+"/VirtualMedia/Cd/Actions/VirtualMedia.InsertMedia", user, pass, `{"Image":"`+image+`"}`)
	if err == nil && r.Code == http.StatusAccepted {
		mon := url + r.Header.Get("Location")
		testenv.WaitFor(2*time.Minute, func() bool {
			r, err = send("GET", mon, user, pass, "")
			return err != nil || r.Code != http.StatusAccepted
		})
	}
	if err != nil || r.Code != http.StatusInternalServerError || !strings.Contains(string(r.Body), "the fixture refuses") {
		t.Errorf("insert with CDI failing: %v %d %s, want 500 with CDI's message", err, r.Code, r.Body)
	}
	if m := media("show"); m.Inserted || m.Status.Health != "Warning" {
		t.Errorf("after a failed import: %+v, want empty with Health Warning", m)
	}
	if !testenv.WaitFor(30*time.Second, func() bool { return len(ours()) == 0 }) {
		t.Fatalf("the failed DataVolume was not deleted: %d left", len(ours()))
	}
	if d, _ := cdDisk(getVM(t, kv, f.Namespace, vm.Name)); d.Name != "" {
		t.Errorf("a failed import left CD %+v on the VM", d)
	}
}
