package labvirt

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/digitalocean/go-libvirt"
	"github.com/digitalocean/go-libvirt/socket/dialers"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"libvirt.org/go/libvirtxml"

	"github.com/bmlab/bmlab/internal/netplumb"
	"github.com/bmlab/bmlab/internal/netplumb/netnstest"
	"github.com/bmlab/bmlab/internal/testenv"
)

func TestNetworkXMLMarksOwnership(t *testing.T) {
	x, err := NetworkXML(NetworkSpec{Name: "baremetal", Bridge: "baremetal", Lab: "seed"}, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"<name>baremetal</name>", `<forward mode="bridge">`, `<bridge name="baremetal">`,
		`xmlns="http://bmlab.dev/xmlns/lab/1"`, `name="seed"`} {
		if !strings.Contains(x, want) {
			t.Errorf("network XML lacks %s:\n%s", want, x)
		}
	}
	var n libvirtxml.Network
	if err := n.Unmarshal(x); err != nil {
		t.Fatal(err)
	}
	if got := networkOwner(&n); got != "seed" {
		t.Errorf("owner read back = %q, want seed", got)
	}
	// Another application's metadata beside the lab's mark.
	n.Metadata.XML = `<other:x xmlns:other="urn:other">y</other:x>` + n.Metadata.XML
	if got := networkOwner(&n); got != "seed" {
		t.Errorf("owner beside other metadata = %q, want seed", got)
	}
	n.Metadata = nil
	if got := networkOwner(&n); got != "" {
		t.Errorf("owner without metadata = %q, want none", got)
	}
}

func TestNetworkProblems(t *testing.T) {
	spec := NetworkSpec{Name: "bm", Bridge: "bm", Lab: "seed"}
	good := NetworkState{Name: "bm", Exists: true, Active: true, Autostart: true, Forward: "bridge", Bridge: "bm", Owner: "seed"}
	if p := NetworkProblems(spec, good); len(p) != 0 {
		t.Errorf("problems of a good network: %v", p)
	}
	nat := good
	nat.Forward, nat.Bridge, nat.Active = "nat", "virbr9", false
	if p := NetworkProblems(spec, nat); len(p) != 2 {
		t.Errorf("problems of a NAT network on virbr9, inactive: %v, want 2", p)
	}
	other := good
	other.Owner = ""
	if p := NetworkProblems(spec, other); len(p) != 1 || !strings.Contains(p[0], "not the lab's") {
		t.Errorf("problems of a foreign network: %v", p)
	}
}

// networkTestEnv connects to libvirtd and opens a netlink handle in the
// namespace libvirtd runs in (labci), where its bridges and taps live.
func networkTestEnv(t *testing.T) (*libvirt.Libvirt, *netlink.Handle, *netplumb.Plumber, string) {
	t.Helper()
	testenv.Libvirt(t)
	ns, err := netns.GetFromName("labci")
	testenv.Require(t, err == nil, "network namespace labci with libvirtd in it (hack/start-libvirtd.sh)")
	ns.Close()
	h, err := netplumb.OpenNamespace("labci")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)

	l := libvirt.NewWithDialer(dialers.NewLocal())
	if err := l.ConnectToURI(libvirt.QEMUSystem); err != nil {
		t.Fatalf("connect to libvirtd: %v", err)
	}
	t.Cleanup(func() { _ = l.Disconnect() })

	lab := "np-" + netnstest.Rand(3)
	return l, h, netplumb.New(h, lab, nil), lab
}

// TestNetworkBootsVMOnLabBridge: netplumb makes a lab bridge in labci,
// ensureNetwork defines the libvirt network of the same name on it, and a
// VM whose NIC is on that network boots the marker ISO with its tap
// enslaved to the bridge.
func TestNetworkBootsVMOnLabBridge(t *testing.T) {
	l, h, p, lab := networkTestEnv(t)
	iso := testenv.MarkerISO(t)
	ctx := context.Background()

	br := "np-bm-" + netnstest.Rand(3)
	top := netplumb.Topology{Bridges: []netplumb.Bridge{{Name: br, MTU: 1500}}}
	t.Cleanup(func() {
		if _, err := p.Down(ctx, top); err != nil {
			t.Errorf("netplumb down: %v", err)
		}
	})
	if _, err := p.Apply(ctx, top); err != nil {
		t.Fatalf("netplumb apply in labci: %v", err)
	}

	spec := NetworkSpec{Name: br, Bridge: br, Lab: lab}
	t.Cleanup(func() { networkTestDelete(t, br, lab) })
	if changed, err := ensureNetwork(ctx, l, spec); err != nil || !changed {
		t.Fatalf("first EnsureNetwork = %v, %v; want changed", changed, err)
	}
	if changed, err := ensureNetwork(ctx, l, spec); err != nil || changed {
		t.Fatalf("second EnsureNetwork = %v, %v; want unchanged", changed, err)
	}
	st, err := getNetworkState(ctx, l, br)
	if err != nil || !st.Active || !st.Autostart || st.Bridge != br || st.Name != br {
		t.Fatalf("network state %+v, %v: want active, autostarted, name == bridge", st, err)
	}

	logDir := testenv.TmpDir(t, "np-vm-", 0o777)
	serial := filepath.Join(logDir, "serial.log")
	name := "np-vm-" + netnstest.Rand(3)
	start := time.Now()
	dom, err := l.DomainCreateXML(networkTestDomainXML(t, name, iso, serial, br), libvirt.DomainStartAutodestroy)
	if err != nil {
		t.Fatalf("start VM: %v", err)
	}
	t.Cleanup(func() {
		if err := l.DomainDestroy(dom); err != nil && !networkTestDomainGone(err) {
			t.Errorf("destroy VM: %v", err)
		}
	})

	// The tap libvirt made for the NIC, as the live XML names it, must be a
	// port of the lab's bridge, says the kernel.
	live, err := l.DomainGetXMLDesc(dom, 0)
	if err != nil {
		t.Fatalf("live XML: %v", err)
	}
	var d libvirtxml.Domain
	if err := d.Unmarshal(live); err != nil {
		t.Fatal(err)
	}
	if len(d.Devices.Interfaces) != 1 || d.Devices.Interfaces[0].Target == nil {
		t.Fatalf("live XML has no interface target:\n%s", live)
	}
	tap := d.Devices.Interfaces[0].Target.Dev
	t.Logf("VM %s started in %v, tap %s", name, time.Since(start).Round(time.Millisecond), tap)
	obs, err := netplumb.Observe(h)
	if err != nil {
		t.Fatal(err)
	}
	tl, ok := obs.Links[tap]
	if !ok {
		t.Fatalf("tap %q not in labci", tap)
	}
	if master := obs.Links[br]; tl.Master == 0 || tl.Master != master.Index {
		t.Fatalf("tap %s master ifindex %d, want %s (%d)", tap, tl.Master, br, master.Index)
	}

	if !testenv.WaitFor(90*time.Second, func() bool {
		b, _ := os.ReadFile(serial)
		return strings.Contains(string(b), testenv.Marker)
	}) {
		b, _ := os.ReadFile(serial)
		t.Fatalf("no %s on the serial console in 90 s; log:\n%s", testenv.Marker, b)
	}
	t.Logf("marker on the serial console %v after start", time.Since(start).Round(time.Millisecond))
}

func TestEnsureNetworkLeavesForeignNetworkAlone(t *testing.T) {
	l, _, _, lab := networkTestEnv(t)
	ctx := context.Background()
	name := "np-fx-" + netnstest.Rand(3)
	// Someone else's network with a lab name: defined, never started (its
	// bridge does not exist), no lab mark.
	net := defineForeign(t, l, &libvirtxml.Network{Name: name, Forward: &libvirtxml.NetworkForward{Mode: "bridge"},
		Bridge: &libvirtxml.NetworkBridge{Name: name}})

	_, err := ensureNetwork(ctx, l, NetworkSpec{Name: name, Bridge: name, Lab: lab})
	if !errors.Is(err, ErrNetworkForeign) || !strings.Contains(err.Error(), "virsh net-undefine "+name) {
		t.Errorf("EnsureNetwork on a foreign network = %v, want ErrNetworkForeign with a fix", err)
	}
	if _, err := deleteNetwork(ctx, l, name, lab); !errors.Is(err, ErrNetworkForeign) {
		t.Errorf("DeleteNetwork on a foreign network = %v, want ErrNetworkForeign", err)
	}
	after, err := l.NetworkGetXMLDesc(net, 0)
	if err != nil {
		t.Fatalf("the foreign network is gone: %v", err)
	}
	if strings.Contains(after, MarkNS) {
		t.Errorf("the foreign network was marked:\n%s", after)
	}
	if deleted, err := deleteNetwork(ctx, l, "np-none-"+netnstest.Rand(3), lab); err != nil || deleted {
		t.Errorf("DeleteNetwork of a missing network = %v, %v; want false, nil", deleted, err)
	}
}

// networkTestDelete deletes the test's network on a fresh connection, so a
// libvirtd restarted during the test does not leak it.
func networkTestDelete(t *testing.T, name, lab string) {
	t.Helper()
	c, err := Dial(context.Background(), "qemu:///system")
	if err != nil {
		t.Errorf("clean up libvirt network %s: %v", name, err)
		return
	}
	defer c.Close()
	if _, err := deleteNetwork(context.Background(), c.l, name, lab); err != nil {
		t.Errorf("clean up libvirt network %s: %v", name, err)
	}
}

func networkTestDomainXML(t *testing.T, name, iso, serial, network string) string {
	t.Helper()
	sata := uint(0)
	d := libvirtxml.Domain{
		Type:   "qemu",
		Name:   name,
		Memory: &libvirtxml.DomainMemory{Value: 128, Unit: "MiB"},
		OS: &libvirtxml.DomainOS{
			Type:        &libvirtxml.DomainOSType{Arch: "x86_64", Machine: "q35", Type: "hvm"},
			BootDevices: []libvirtxml.DomainBootDevice{{Dev: "cdrom"}},
		},
		OnPoweroff: "destroy",
		Devices: &libvirtxml.DomainDeviceList{
			Disks: []libvirtxml.DomainDisk{{
				Device:   "cdrom",
				Driver:   &libvirtxml.DomainDiskDriver{Name: "qemu", Type: "raw"},
				Source:   &libvirtxml.DomainDiskSource{File: &libvirtxml.DomainDiskSourceFile{File: iso}},
				Target:   &libvirtxml.DomainDiskTarget{Dev: "sda", Bus: "sata"},
				ReadOnly: &libvirtxml.DomainDiskReadOnly{},
				Address: &libvirtxml.DomainAddress{Drive: &libvirtxml.DomainAddressDrive{
					Controller: &sata, Bus: &sata, Unit: &sata}},
			}},
			Interfaces: []libvirtxml.DomainInterface{{
				Source: &libvirtxml.DomainInterfaceSource{Network: &libvirtxml.DomainInterfaceSourceNetwork{Network: network}},
			}},
			Serials: []libvirtxml.DomainSerial{{
				Source: &libvirtxml.DomainChardevSource{File: &libvirtxml.DomainChardevSourceFile{Path: serial}},
			}},
		},
	}
	x, err := d.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return x
}

func networkTestDomainGone(err error) bool {
	var e libvirt.Error
	return errors.As(err, &e) && (e.Code == uint32(libvirt.ErrNoDomain) || e.Code == uint32(libvirt.ErrOperationInvalid))
}
