package steps

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/bmlab/bmlab/internal/lab"
	"github.com/bmlab/bmlab/internal/lab/labtest"
	"github.com/bmlab/bmlab/internal/netplumb"
	"github.com/bmlab/bmlab/internal/plan"
)

func objects(d []lab.Difference) []string {
	var out []string
	for _, x := range d {
		s := x.Object + " " + x.Kind
		if x.Blocking {
			s += " (blocking)"
		}
		out = append(out, s)
	}
	return out
}

// networkUp is a lab's Env on a fake host f on which EnsureNetwork has made
// the lab's network.
func networkUp(t *testing.T) (*labtest.Host, *lab.Env) {
	t.Helper()
	f := labtest.NewHost()
	e, _ := labtest.Env(t, f, "")
	_, err := EnsureNetwork(context.Background(), e)
	labtest.Must(t, err)
	return f, e
}

// noObjects fails for each kind of object f holds, saying what (a format
// taking the kind and the objects).
func noObjects(t *testing.T, f *labtest.Host, what string) {
	t.Helper()
	for kind, objs := range f.Objs {
		if len(objs) > 0 {
			t.Errorf(what, kind, objs)
		}
	}
}

// TestNetworkPath: check, ensure and remove are one path, the one `labctl
// net` prints and the network action runs. A fresh host differs in every
// object, in repair order (the LLDP sender after the networks it sends
// on); after EnsureNetwork nothing differs and a second one changes
// nothing; RemoveNetwork removes what it made, the sender first.
func TestNetworkPath(t *testing.T) {
	f := labtest.NewHost()
	e, _ := labtest.Env(t, f, "")
	ctx := context.Background()
	diffs, err := CheckNetwork(ctx, e)
	labtest.Must(t, err)
	want := []string{"libvirt network fk-machine nat-network", "baremetal missing", "bmlab-veth0 missing", "bmlab-veth1 missing", "libvirt network baremetal libvirt-network", "LLDP sender lldp-sender"}
	if d := cmp.Diff(want, objects(diffs)); d != "" {
		t.Errorf("check of an empty host (-want +got):\n%s", d)
	}
	done, err := EnsureNetwork(ctx, e)
	labtest.Must(t, err)
	if len(done) != 6 || !strings.Contains(done[0], "fk-machine: NAT network") || done[5] != "LLDP sender" {
		t.Errorf("ensure = %q, want the NAT network, three links, the bridge network and the LLDP sender", done)
	}
	if diffs, err = CheckNetwork(ctx, e); err != nil || len(diffs) != 0 {
		t.Errorf("check after ensure = %v, %v; want none", objects(diffs), err)
	}
	if done, err = EnsureNetwork(ctx, e); err != nil || len(done) != 0 {
		t.Errorf("second ensure = %q, %v; want nothing changed", done, err)
	}
	rm, err := RemoveNetwork(ctx, e)
	labtest.Must(t, err)
	if d := cmp.Diff(NetworkRemoval{Shared: []string{}, Networks: []string{"baremetal", "fk-machine"}, Links: []string{"baremetal", "bmlab-veth0", "bmlab-veth1", "bmnat-fk"}, LLDPSenders: []string{"lldp-fk"}, Foreign: []string{}, ResolverDropIns: []string{}}, rm); d != "" {
		t.Errorf("remove (-want +got):\n%s", d)
	}
	noObjects(t, f, "%ss left: %v")
}

// TestLLDPOff: with network.lldp off, a sender the lab left running is a
// difference, and repair stops it.
func TestLLDPOff(t *testing.T) {
	_, e := networkUp(t)
	ctx := context.Background()
	e.Plan.Network.LLDP = nil
	diffs, err := CheckNetwork(ctx, e)
	labtest.Must(t, err)
	if len(diffs) != 1 || diffs[0].Kind != "lldp-sender" || !strings.Contains(diffs[0].Want, "network.lldp is off") {
		t.Errorf("check with the sender running and network.lldp off = %+v, want the sender named", diffs)
	}
	done, err := EnsureNetwork(ctx, e)
	labtest.Must(t, err)
	if len(done) != 1 || !strings.Contains(done[0], "LLDP sender: stopped") {
		t.Errorf("repair = %q, want the sender stopped", done)
	}
	if diffs, err = CheckNetwork(ctx, e); err != nil || len(diffs) != 0 {
		t.Errorf("check after repair = %v, %v; want none", objects(diffs), err)
	}
}

// TestNetworkForeign: another lab's objects with the plan's names block the
// check and are never changed by remove.
func TestNetworkForeign(t *testing.T) {
	f := labtest.NewHost()
	e, _ := labtest.Env(t, f, "")
	ctx := context.Background()
	f.Put(lab.KindNetwork, "baremetal", "other")
	f.Put(lab.KindLink, "baremetal", "other")
	diffs, err := CheckNetwork(ctx, e)
	labtest.Must(t, err)
	got := objects(diffs)
	for _, w := range []string{"baremetal foreign (blocking)", "libvirt network baremetal libvirt-network (blocking)"} {
		if !slices.Contains(got, w) {
			t.Errorf("check = %q, want %q among them", got, w)
		}
	}
	rm, err := RemoveNetwork(ctx, e)
	labtest.Must(t, err)
	if !slices.Equal(rm.Foreign, []string{"libvirt network baremetal"}) || len(rm.Networks) != 0 {
		t.Errorf("remove = %+v, want the foreign network left and named", rm)
	}
	if f.Objs[lab.KindNetwork]["baremetal"] != "other" || f.Objs[lab.KindLink]["baremetal"] != "other" {
		t.Errorf("remove changed another lab's objects: %v", f.Objs)
	}
}

// TestNetworkResolverDropIn: the host resolver drop-in is one of the
// network's objects: check reports it missing, changed or not the lab's;
// ensure writes it and repairs it; remove takes the plan's and the lab's
// drop-ins at the other places (down --lab), bearing its mark only, and
// never a file without it.
func TestNetworkResolverDropIn(t *testing.T) {
	f := labtest.NewHost()
	e, _ := labtest.Env(t, f, "")
	ctx := context.Background()
	dir := t.TempDir()
	p := e.Plan
	path := filepath.Join(dir, "dnsmasq.d", "bmlab-fk.conf")
	other := filepath.Join(dir, "resolved.conf.d", "bmlab-fk.conf")
	p.Network.HostResolver = "dnsmasq"
	p.Network.Resolver = &plan.Resolver{Kind: "dnsmasq", Path: path, Domain: p.Cluster.Domain, DNS: p.Network.NAT.HostAddress}
	p.Network.ResolverDropIns = []string{path, other}
	has := func(want string) {
		t.Helper()
		diffs, err := CheckNetwork(ctx, e)
		labtest.Must(t, err)
		got := objects(diffs)
		if (want == "") != !slices.ContainsFunc(got, func(s string) bool { return strings.HasPrefix(s, path) }) ||
			want != "" && !slices.ContainsFunc(diffs, func(d lab.Difference) bool { return d.Object == path && d.Got == want }) {
			t.Errorf("check = %+v, want %q for %s", diffs, want, path)
		}
	}
	has("missing")
	done, err := EnsureNetwork(ctx, e)
	labtest.Must(t, err)
	if !slices.ContainsFunc(done, func(s string) bool { return strings.HasPrefix(s, "host resolver: wrote "+path) }) {
		t.Errorf("ensure = %q, want the drop-in written", done)
	}
	want := "# bmlab lab fk: the names of cluster " + p.Cluster.Domain + " for this host. labctl writes this\n" +
		"# file (`labctl up`, `labctl net repair`) and removes it (`labctl down`).\n" +
		"server=/" + p.Cluster.Domain + "/" + p.Network.NAT.HostAddress.String() + "\n"
	if got, _ := os.ReadFile(path); string(got) != want {
		t.Errorf("drop-in:\n%s\nwant:\n%s", got, want)
	}
	has("")
	labtest.Must(t, os.WriteFile(path, []byte(want+"server=/"+p.Cluster.Domain+"/192.0.2.1\n"), 0o644))
	has("changed")
	labtest.Must(t, os.Remove(path))
	has("missing")
	if done, err := EnsureNetwork(ctx, e); err != nil || len(done) != 1 {
		t.Errorf("repair = %q, %v; want the drop-in alone written again", done, err)
	}
	has("")
	// One the lab wrote at the other place (an earlier lab file), and
	// another lab's there: remove takes the lab's only.
	labtest.Must(t, os.MkdirAll(filepath.Dir(other), 0o755))
	labtest.Must(t, os.WriteFile(other, []byte("# bmlab lab fk: the names of cluster x for this host.\n[Resolve]\n"), 0o644))
	foreign := filepath.Join(filepath.Dir(other), "bmlab-fk2.conf")
	labtest.Must(t, os.WriteFile(foreign, []byte("# bmlab lab fk2: the names of cluster y for this host.\n"), 0o644))
	rm, err := RemoveNetwork(ctx, e)
	labtest.Must(t, err)
	if d := cmp.Diff([]string{path, other}, rm.ResolverDropIns); d != "" {
		t.Errorf("removed drop-ins (-want +got):\n%s", d)
	}
	if _, err := os.Stat(foreign); err != nil {
		t.Errorf("remove took another lab's drop-in: %v", err)
	}
	// A file at the path without the lab's mark: blocking, never written
	// over nor removed.
	labtest.Must(t, os.WriteFile(path, []byte("server=/example.test/192.0.2.1\n"), 0o644))
	diffs, err := CheckNetwork(ctx, e)
	labtest.Must(t, err)
	if !slices.Contains(objects(diffs), path+" host-resolver (blocking)") {
		t.Errorf("check = %q, want the foreign file blocking", objects(diffs))
	}
	if _, err := EnsureNetwork(ctx, e); !errors.Is(err, netplumb.ErrNotLabs) {
		t.Errorf("ensure over a foreign file = %v, want ErrNotLabs", err)
	}
	rm, err = RemoveNetwork(ctx, e)
	labtest.Must(t, err)
	if got, _ := os.ReadFile(path); string(got) != "server=/example.test/192.0.2.1\n" || !slices.Contains(rm.Foreign, "file "+path) {
		t.Errorf("remove = %+v, file %q; want the foreign file left and named", rm, got)
	}
}

// TestPreflightForeignResolverDropIn: a file without the lab's mark where
// its drop-in goes stops up in preflight, before anything is made.
func TestPreflightForeignResolverDropIn(t *testing.T) {
	f := labtest.NewHost()
	e, _ := labtest.Env(t, f, "")
	p := e.Plan
	path := filepath.Join(t.TempDir(), "bmlab-fk.conf")
	labtest.Must(t, os.WriteFile(path, []byte("server=/example.test/192.0.2.1\n"), 0o644))
	p.Network.HostResolver = "dnsmasq"
	p.Network.Resolver = &plan.Resolver{Kind: "dnsmasq", Path: path, Domain: p.Cluster.Domain, DNS: p.Network.NAT.HostAddress}
	actions := []lab.Action{Preflight{}, Network{}, Storage{}, Nodes{}, BMCs{}}
	err := lab.Up(context.Background(), e, actions, "")
	if err == nil || !strings.Contains(err.Error(), "preflight: ") || !strings.Contains(err.Error(), "file "+path+" has no lab's mark") {
		t.Fatalf("up = %v, want preflight to name the file", err)
	}
	noObjects(t, f, "%ss made though preflight refused: %v")
}

// TestPreflightAsksTheProvider: preflight weighs the lab against what the
// provider says of its host (lab.Provider.Info), not against the machine
// the test runs on: no KVM, an x86 host, fewer CPUs and less memory than
// planned are notes; less than a GiB free stops it, as do a host that
// cannot be asked and a lab directory its VMs cannot read, before anything
// is made.
func TestPreflightAsksTheProvider(t *testing.T) {
	for _, tt := range []struct {
		name   string
		info   lab.HostInfo
		fail   error
		notes  []string
		refuse string
	}{
		{name: "roomy KVM host", info: lab.HostInfo{KVM: true, Arch: "amd64", CPUs: 512, MemoryMiB: 1 << 22, FreeGiB: 100, FreeKnown: true},
			notes: []string{"memory: ", "disk: "}},
		{name: "small TCG host", info: lab.HostInfo{Arch: "amd64", CPUs: 1, MemoryMiB: 1024, FreeGiB: 7, FreeKnown: true},
			notes: []string{"no /dev/kvm", "memory: 2048 MiB planned of 1024 MiB (200%): overcommitted", "CPU: 5 vCPUs planned on 1 host CPUs (overcommitted", "disk: 10 GiB of thin disks planned, 7 GiB free"}},
		{name: "figures unknown", info: lab.HostInfo{KVM: true, Arch: "amd64"}},
		{name: "full disk", info: lab.HostInfo{KVM: true, Arch: "amd64", CPUs: 512, MemoryMiB: 1 << 22, FreeKnown: true}, refuse: "less than 1 GiB free in "},
		{name: "host not answering", fail: errors.New("libvirtd gone"), refuse: "the lab's host: libvirtd gone"},
		{name: "lab's files out of the VMs' reach", info: lab.HostInfo{KVM: true, Arch: "amd64", CPUs: 512, MemoryMiB: 1 << 22, FreeGiB: 100, FreeKnown: true,
			Unreachable: errors.New("directory not traversable by qemu")}, refuse: "directory not traversable by qemu"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := labtest.NewHost()
			f.HostInfo = tt.info
			if tt.fail != nil {
				f.Fail["info"] = tt.fail
			}
			e, rec := labtest.Env(t, f, "")
			_, err := Preflight{}.Ensure(context.Background(), e)
			if tt.refuse != "" {
				if err == nil || !strings.Contains(err.Error(), tt.refuse) {
					t.Fatalf("preflight = %v, want %q", err, tt.refuse)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			all := strings.Join(rec.Lines, "\n")
			for _, n := range tt.notes {
				if !strings.Contains(all, n) {
					t.Errorf("notes lack %q:\n%s", n, all)
				}
			}
			for _, n := range []string{"no /dev/kvm", "overcommitted", "CPU: ", "memory: ", "disk: "} {
				if !strings.Contains(strings.Join(tt.notes, "\n"), n) && strings.Contains(all, n) {
					t.Errorf("a note %q the host gives no cause for:\n%s", n, all)
				}
			}
			noObjects(t, f, "preflight made %ss: %v")
		})
	}
}

// TestLLDPNotOnASpoke: labctl on another host of the lab leaves the LLDP
// sender alone (the hub's, and in the tests that host is this machine).
func TestLLDPNotOnASpoke(t *testing.T) {
	f, e := networkUp(t)
	ctx := context.Background()
	e.Plan.Spoke, e.Plan.Network.LLDP = "beta", nil
	if diffs, err := CheckNetwork(ctx, e); err != nil || len(diffs) != 0 {
		t.Errorf("check on a spoke = %v, %v; want none", objects(diffs), err)
	}
	if done, err := EnsureNetwork(ctx, e); err != nil || len(done) != 0 {
		t.Errorf("repair on a spoke = %q, %v; want nothing", done, err)
	}
	rm, err := RemoveNetwork(ctx, e)
	labtest.Must(t, err)
	if len(rm.LLDPSenders) != 0 || len(f.Objs[lab.KindLLDP]) != 1 {
		t.Errorf("down on a spoke stopped %v; the hub's sender left: %v", rm.LLDPSenders, f.Objs[lab.KindLLDP])
	}
}

// TestNetCheckShowsANodesNICs: net check reports a node whose domain's
// NICs are not the plan's (here: defined before the lab had a provisioning
// network), with the NICs it wants, in order, and the fix; without
// libvirt it does not look.
func TestNetCheckShowsANodesNICs(t *testing.T) {
	f := labtest.NewHost()
	e, _ := labtest.EnvFor(t, f, "", "name: fk\nnetwork: {provisioningNetwork: Managed}\ncluster: {sshKey: id.pub, workers: {count: 0}}\n")
	ctx := context.Background()
	if _, err := EnsureNetwork(ctx, e); err != nil {
		t.Fatal(err)
	}
	n := e.Plan.Nodes[1]
	f.Fail["nics:"+n.Name] = errors.New("NIC 1 is " + n.MAC + " on network baremetal, want " + n.BootMAC + " on network provisioning")
	diffs, err := CheckNetwork(ctx, e)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]string{"domain " + n.Name + " node-nics"}, objects(diffs)); d != "" {
		t.Fatalf("net check (-want +got):\n%s", d)
	}
	want := "enp1s0 " + n.BootMAC + " on provisioning, enp2s0 " + n.MAC + " on baremetal"
	if diffs[0].Want != want || !strings.Contains(diffs[0].Got, "want "+n.BootMAC) || !strings.Contains(diffs[0].Fix, "labctl down, then labctl up") {
		t.Errorf("the difference: %+v, want the NICs %q", diffs[0], want)
	}
	e.Plan.LinksOnly = true
	if diffs, err := CheckNetwork(ctx, e); err != nil || slices.ContainsFunc(diffs, func(d lab.Difference) bool { return d.Kind == "node-nics" }) {
		t.Errorf("net check --no-libvirt: %v, %v", objects(diffs), err)
	}
}

// TestProvisioningDHCPServer: an Unmanaged lab's network step keeps its
// provisioning DHCP server as it keeps the LLDP sender: check reports it
// missing, ensure starts it after the bridge it listens on, down stops
// it; a Managed lab (the installer's DHCP server) has none, and one left
// running is stopped.
func TestProvisioningDHCPServer(t *testing.T) {
	f := labtest.NewHost()
	e, _ := labtest.EnvFor(t, f, "", "name: fk\nnetwork: {provisioningNetwork: Unmanaged}\ncluster: {sshKey: id.pub, workers: {count: 1}}\n")
	ctx := context.Background()
	if e.Plan.Network.ProvisioningDHCP == nil {
		t.Fatal("an Unmanaged lab's plan has no DHCP server")
	}
	diffs, err := CheckNetwork(ctx, e)
	labtest.Must(t, err)
	if !slices.Contains(objects(diffs), "provisioning DHCP server provisioning-dhcp") {
		t.Errorf("check of an empty host: %v, want the DHCP server missing", objects(diffs))
	}
	done, err := EnsureNetwork(ctx, e)
	labtest.Must(t, err)
	dhcp, prov := slices.Index(done, "provisioning DHCP server"), slices.IndexFunc(done, func(s string) bool {
		return strings.Contains(s, "provisioning") && strings.Contains(s, "libvirt network")
	})
	if dhcp < 0 || prov < 0 || dhcp < prov {
		t.Errorf("ensure = %q, want the DHCP server started after the provisioning bridge's network", done)
	}
	if diffs, err = CheckNetwork(ctx, e); err != nil || len(diffs) != 0 {
		t.Errorf("check after ensure = %v, %v", objects(diffs), err)
	}
	// The same lab, Managed: the server left running is a difference, and
	// repair stops it.
	m, _ := labtest.EnvFor(t, f, filepath.Dir(e.Plan.StateDir), "name: fk\nnetwork: {provisioningNetwork: Managed}\ncluster: {sshKey: id.pub, workers: {count: 1}}\n")
	if m.Plan.Network.ProvisioningDHCP != nil {
		t.Fatal("a Managed lab's plan has a DHCP server of its own")
	}
	if diffs, _ := CheckNetwork(ctx, m); !slices.Contains(objects(diffs), "provisioning DHCP server provisioning-dhcp") {
		t.Errorf("check of a Managed lab with the server running: %v", objects(diffs))
	}
	done, err = EnsureNetwork(ctx, m)
	if err != nil || !slices.Contains(done, "provisioning DHCP server: stopped pid dhcp-fk (the lab has no Unmanaged provisioning network)") {
		t.Errorf("repair of a Managed lab = %q, %v", done, err)
	}
	rm, err := RemoveNetwork(ctx, e)
	labtest.Must(t, err)
	if len(rm.DHCPServers) != 0 || len(f.Objs[lab.KindDHCP]) != 0 {
		t.Errorf("down: %+v, left %v", rm, f.Objs[lab.KindDHCP])
	}
}

// TestNetworkManagerSnippet: where NetworkManager is (its directory holds
// the lab's conf.d), the network's check reports the unmanaged-devices
// snippet missing, ensure writes it with these bytes and says so, and
// remove takes it; where it is not, nothing is written.
func TestNetworkManagerSnippet(t *testing.T) {
	f := labtest.NewHost()
	e, rec := labtest.Env(t, f, "")
	ctx := context.Background()
	root := t.TempDir()
	e.Plan.Network.NMConfDir = filepath.Join(root, "NetworkManager", "conf.d")
	path := filepath.Join(e.Plan.Network.NMConfDir, "90-bmlab-fk.conf")
	if _, err := EnsureNetwork(ctx, e); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(e.Plan.Network.NMConfDir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("without NetworkManager, ensure made %s (%v)", e.Plan.Network.NMConfDir, err)
	}
	labtest.Must(t, os.Mkdir(filepath.Dir(e.Plan.Network.NMConfDir), 0o755))
	diffs, err := CheckNetwork(ctx, e)
	labtest.Must(t, err)
	want := lab.Difference{Object: "NetworkManager", Kind: "unmanaged-missing", Want: path, Fix: "write the unmanaged-devices snippet for the lab's links"}
	if d := cmp.Diff([]lab.Difference{want}, diffs); d != "" {
		t.Errorf("check (-want +got):\n%s", d)
	}
	_, err = Network{}.Ensure(ctx, e)
	labtest.Must(t, err)
	wantNote := "network: NetworkManager found: wrote " + path + " so it leaves the lab's links alone; `nmcli general reload conf` applies it now"
	if !slices.Contains(rec.Lines, wantNote) {
		t.Errorf("notes = %q, want %q", rec.Lines, wantNote)
	}
	wantBytes := "# Written by bmlab (labctl net) for the lab \"fk\": NetworkManager must leave\n" +
		"# the lab's links alone. `labctl net down` removes this file.\n" +
		"[keyfile]\n" +
		"unmanaged-devices+=interface-name:baremetal;interface-name:bmlab-veth0;interface-name:bmlab-veth1\n"
	if got, err := os.ReadFile(path); err != nil || string(got) != wantBytes {
		t.Errorf("snippet = %q, %v; want %q", got, err, wantBytes)
	}
	if diffs, err = CheckNetwork(ctx, e); err != nil || len(diffs) != 0 {
		t.Errorf("check after ensure = %v, %v; want none", objects(diffs), err)
	}
	labtest.Must(t, os.WriteFile(path, []byte("[keyfile]\n"), 0o644))
	if diffs, err = CheckNetwork(ctx, e); err != nil || !slices.Contains(objects(diffs), "NetworkManager unmanaged-missing") {
		t.Errorf("check of a changed snippet = %v, %v; want it named", objects(diffs), err)
	}
	rm, err := RemoveNetwork(ctx, e)
	labtest.Must(t, err)
	if rm.Snippet != path {
		t.Errorf("remove took snippet %q, want %s", rm.Snippet, path)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("snippet left after remove: %v", err)
	}
}

// ownProvider is a provider of the test's own, as a new platform's would
// be: it keeps the host's files in memory instead of writing them, answers
// for images from a table, and records what the steps asked of it. The
// rest is the steps' fake (labtest.Host).
type ownProvider struct {
	*labtest.Host
	images map[string]lab.ImageInfo
	asked  []string
	files  map[string]string // path → the lab whose it is
	sizes  map[string]uint64 // volume → its capacity
}

func (p *ownProvider) Ensure(ctx context.Context, o lab.Object) ([]string, error) {
	p.asked = append(p.asked, fmt.Sprintf("%T", o))
	switch o := o.(type) {
	case lab.Unmanaged:
		return p.keep(o.Path(), o.Lab), nil
	case lab.ResolverDropIn:
		return p.keep(o.Path, o.Lab), nil
	case lab.Volume:
		p.sizes[o.Disk.Volume] = o.Capacity
	}
	return p.Host.Ensure(ctx, o)
}

func (p *ownProvider) keep(path, labName string) []string {
	if p.files[path] == labName {
		return nil
	}
	p.files[path] = labName
	return []string{path}
}

func (p *ownProvider) Differences(ctx context.Context, o lab.Object) ([]lab.Difference, error) {
	switch o := o.(type) {
	case lab.Unmanaged:
		return p.missing(o.Path()), nil
	case lab.ResolverDropIn:
		return p.missing(o.Path), nil
	}
	return p.Host.Differences(ctx, o)
}

func (p *ownProvider) missing(path string) []lab.Difference {
	if _, ok := p.files[path]; ok {
		return nil
	}
	return []lab.Difference{{Object: path, Got: "missing"}}
}

func (p *ownProvider) Owner(ctx context.Context, kind lab.Kind, name string) (bool, string, error) {
	if kind == lab.KindUnmanaged || kind == lab.KindResolver {
		owner, ok := p.files[name]
		return ok, owner, nil
	}
	return p.Host.Owner(ctx, kind, name)
}

func (p *ownProvider) Delete(ctx context.Context, kind lab.Kind, name, labName string) error {
	if kind == lab.KindUnmanaged || kind == lab.KindResolver {
		delete(p.files, name)
		return nil
	}
	return p.Host.Delete(ctx, kind, name, labName)
}

func (p *ownProvider) Image(_ context.Context, path string) (lab.ImageInfo, error) {
	p.asked = append(p.asked, "image "+path)
	info, ok := p.images[path]
	if !ok {
		return lab.ImageInfo{}, fmt.Errorf("image %s: not there", path)
	}
	return info, nil
}

// TestAProviderOfItsOwn: the engine drives the shared steps over a
// provider declared here, with no edit to the engine, the steps or a mode:
// the NetworkManager snippet and the resolver drop-in are the provider's
// to keep (none is written on this machine), a node's image is read
// through it (its virtual size makes the clone's capacity; an image that
// is not qcow2 stops the storage step), and down asks it to remove them.
func TestAProviderOfItsOwn(t *testing.T) {
	ctx := context.Background()
	own := &ownProvider{Host: labtest.NewHost(), images: map[string]lab.ImageInfo{}, files: map[string]string{}, sizes: map[string]uint64{}}
	e, _ := labtest.Env(t, own.Host, "")
	e.Host = own
	p := e.Plan
	root := t.TempDir()
	p.Network.NMConfDir = filepath.Join(root, "NetworkManager", "conf.d")
	labtest.Must(t, os.Mkdir(filepath.Dir(p.Network.NMConfDir), 0o755))
	resolver := filepath.Join(root, "dnsmasq.d", "bmlab-fk.conf")
	p.Network.Resolver = &plan.Resolver{Kind: "dnsmasq", Path: resolver, Domain: p.Cluster.Domain, DNS: p.Network.NAT.HostAddress}
	p.Network.ResolverDropIns = []string{resolver}
	image := filepath.Join(root, "rhcos.qcow2")
	own.images[image] = lab.ImageInfo{Format: "qcow2", VirtualSize: 1 << 40}
	for i := range p.Nodes {
		p.Nodes[i].Disks[0].Backing = image
	}
	steps := []lab.Action{Preflight{}, Network{}, Storage{}, Nodes{}, BMCs{}}
	labtest.Must(t, lab.Up(ctx, e, steps, ""))

	snippet := filepath.Join(p.Network.NMConfDir, "90-bmlab-fk.conf")
	if d := cmp.Diff(map[string]string{snippet: "fk", resolver: "fk"}, own.files); d != "" {
		t.Errorf("the provider's files (-want +got):\n%s", d)
	}
	for _, dir := range []string{p.Network.NMConfDir, filepath.Dir(resolver)} {
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Errorf("the steps made %s on this machine (%v): it is the provider's to make", dir, err)
		}
	}
	for _, w := range []string{"lab.Unmanaged", "lab.ResolverDropIn", "image " + image} {
		if !slices.Contains(own.asked, w) {
			t.Errorf("the steps did not ask the provider for %s: %q", w, own.asked)
		}
	}
	for v, size := range own.sizes {
		if size != 1<<40 {
			t.Errorf("volume %s: capacity %d, want the image's virtual size %d", v, size, uint64(1<<40))
		}
	}
	if len(own.sizes) == 0 {
		t.Error("no volume made")
	}
	if n := strings.Count(strings.Join(own.asked, "\n"), "image "+image); n != 1 {
		t.Errorf("the image was read %d times, want once (every node's disk clones it)", n)
	}
	if diffs, err := CheckNetwork(ctx, e); err != nil || len(diffs) != 0 {
		t.Errorf("check after up = %v, %v; want none", objects(diffs), err)
	}
	rm, err := RemoveNetwork(ctx, e)
	labtest.Must(t, err)
	if rm.Snippet != snippet || !slices.Equal(rm.ResolverDropIns, []string{resolver}) || len(own.files) != 0 {
		t.Errorf("remove = %+v, the provider keeps %v; want both files removed", rm, own.files)
	}

	// An image that is not qcow2 stops the storage step, in the lab
	// file's words.
	own.images[image] = lab.ImageInfo{Format: "raw", VirtualSize: 1 << 30}
	_, err = Storage{}.Ensure(ctx, e)
	if err == nil || !strings.Contains(err.Error(), "cluster.image "+image+" is raw, not qcow2") {
		t.Errorf("storage over a raw image = %v, want it refused", err)
	}
}

// TestWriteFiles: an installer file and the lab's copy are written (0600,
// their directories made) when either differs, and left alone when both
// hold the data.
func TestWriteFiles(t *testing.T) {
	dir := t.TempDir()
	file, copyFile := filepath.Join(dir, "install", "install-config.yaml"), filepath.Join(dir, "state", "install-config.yaml")
	for i, c := range []struct {
		data  string
		wrote bool
	}{{"a: 1\n", true}, {"a: 1\n", false}, {"a: 2\n", true}} {
		wrote, err := WriteFiles([]byte(c.data), file, copyFile)
		if err != nil || wrote != c.wrote {
			t.Fatalf("write %d: wrote %v, %v; want %v", i, wrote, err, c.wrote)
		}
		for _, p := range []string{file, copyFile} {
			if got, err := os.ReadFile(p); err != nil || string(got) != c.data {
				t.Errorf("write %d: %s holds %q (%v), want %q", i, p, got, err, c.data)
			}
		}
	}
	if err := os.WriteFile(copyFile, []byte("edited"), 0o644); err != nil {
		t.Fatal(err)
	}
	if wrote, err := WriteFiles([]byte("a: 2\n"), file, copyFile); err != nil || !wrote {
		t.Errorf("a changed copy: wrote %v, %v; want it written again", wrote, err)
	}
	if st, err := os.Stat(copyFile); err != nil {
		t.Error(err)
	} else if st.Mode().Perm() != 0o600 {
		t.Errorf("the copy's mode is %v, want 0600", st.Mode().Perm())
	}
}

// TestEnsureImageAsksTheProvider: an image given by URL is the provider's
// to download (lab.Provider.Fetch), once, its progress told under the
// step; a path needs no download.
func TestEnsureImageAsksTheProvider(t *testing.T) {
	ctx := context.Background()
	f := labtest.NewHost()
	e, rec := labtest.Env(t, f, "")
	const url = "http://images.invalid/rhcos.qcow2"
	path := filepath.Join(t.TempDir(), "images", "rhcos.qcow2")
	for i, want := range []bool{true, false} {
		if changed, err := EnsureImage(ctx, e, "storage", url, path); err != nil || changed != want {
			t.Fatalf("EnsureImage %d = %v, %v; want %v", i, changed, err, want)
		}
	}
	if d := cmp.Diff([]string{"fetch " + url}, f.Calls); d != "" {
		t.Errorf("provider calls (-want +got):\n%s", d)
	}
	if len(rec.Progressed) == 0 || !strings.HasPrefix(rec.Progressed[len(rec.Progressed)-1], "storage: downloading "+url+": ") {
		t.Errorf("progress = %q, want the download's under storage", rec.Progressed)
	}
}
