package labconfig

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/bmlab/bmlab/internal/netplumb"
	"github.com/bmlab/bmlab/internal/ocp"
)

// prefixes compares netip.Prefix values, whose fields are unexported;
// netips compares netip.Prefix and netip.Addr values.
var (
	prefixes = cmp.Comparer(func(a, b netip.Prefix) bool { return a == b })
	netips   = cmp.Options{prefixes, cmp.Comparer(func(a, b netip.Addr) bool { return a == b })}
)

func TestDefaultIsTheSeedLab(t *testing.T) {
	c := Default()
	if err := c.Validate(); err != nil {
		t.Fatalf("Validate(Default()) = %v", err)
	}
	want := netplumb.Topology{
		Bridges: []netplumb.Bridge{{Name: "baremetal", MTU: 1500}},
		Veths:   []netplumb.Veth{{Name: "bmlab-veth0", Master: "baremetal", Peer: "bmlab-veth1", PeerMaster: "virbr0", MTU: 1500}},
	}
	if d := cmp.Diff(want, c.Network.Topology(), prefixes); d != "" {
		t.Errorf("default topology (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]string{"baremetal"}, c.Network.LibvirtNetworks()); d != "" {
		t.Errorf("LibvirtNetworks (-want +got):\n%s", d)
	}
	if c.Name != "seed" || c.Network.ProvisioningNetwork != ocp.ProvisioningDisabled {
		t.Errorf("name %q provisioningNetwork %q, want seed Disabled", c.Name, c.Network.ProvisioningNetwork)
	}
}

func TestParse(t *testing.T) {
	no := false
	tests := []struct {
		name string
		yaml string
		want Network
	}{{
		name: "empty file is the seed lab",
		yaml: "",
		want: Default().Network,
	}, {
		name: "managed provisioning adds the provisioning bridge",
		yaml: "network:\n  provisioningNetwork: Managed\n  libvirtBridge: virbr1\n  mtu: 9000\n",
		want: Network{
			ProvisioningNetwork: "Managed", MTU: 9000, LibvirtBridge: "virbr1", NetworkManagerConfDir: DefaultNMConfDir, HostResolver: ResolverHosts,
			Bridges: []Bridge{{Name: "baremetal", MTU: 9000}, {Name: "provisioning", MTU: 9000}},
			Veths:   []Veth{{Name: "bmlab-veth0", Master: "baremetal", Peer: "bmlab-veth1", PeerMaster: "virbr1", MTU: 9000}},
		},
	}, {
		name: "explicit links, no veths, a VLAN with an address",
		yaml: `apiVersion: bmlab.dev/v1alpha1
kind: Lab
name: l1
network:
  bridges:
  - name: bm
    mtu: 1400
    libvirtNetwork: false
  veths: []
  vlans:
  - {name: bm.10, parent: bm, id: 10, addresses: [10.9.0.1/24]}
`,
		want: Network{
			ProvisioningNetwork: "Disabled", MTU: 1500, LibvirtBridge: "virbr0", NetworkManagerConfDir: DefaultNMConfDir, HostResolver: ResolverHosts,
			Bridges: []Bridge{{Name: "bm", MTU: 1400, LibvirtNetwork: &no}},
			Veths:   []Veth{},
			VLANs:   []VLAN{{Name: "bm.10", Parent: "bm", ID: 10, MTU: 1500, Addresses: []netip.Prefix{netip.MustParsePrefix("10.9.0.1/24")}}},
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse([]byte(tt.yaml))
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if d := cmp.Diff(tt.want, c.Network, prefixes); d != "" {
				t.Errorf("network (-want +got):\n%s", d)
			}
		})
	}
}

func TestParseErrorsNameTheField(t *testing.T) {
	tests := []struct{ yaml, want string }{
		{"network:\n  bridgez: []\n", `network.bridgez (line 2): unknown key; did you mean "bridges"?`},
		{"mastres: 3\n", `mastres (line 1): unknown key; did you mean cluster.masters?`},
		{"network:\n  mtu: big\n", `network.mtu (line 2): want a whole number, got "big"`},
		{"network:\n  bridges: [{name: 12}]\n", `network.bridges[0].name (line 2): want a string, got "12"; quote it`},
		{"cluster:\n  machineNetwork: 10.0.0.0/33\n", `cluster.machineNetwork (line 2): "10.0.0.0/33" is not an address with a prefix length (10.0.0.0/24): prefix length out of range`},
		{"name: x\n  bad: [\n", `not YAML: line 2:`},
		{"network:\n  bridges: [{name: bm}]\n  veths: [{name: v0, peer: v1, master: nosuch0}]\n", `network.veths[0].master: "nosuch0" is not one of the lab's bridges`},
		{"kind: Cluster\n", `kind: "Cluster" is not supported`},
		{"name: ../x\n", `name: "../x" must be`},
		{"network:\n  provisioningNetwork: managed\n", `network.provisioningNetwork: "managed" is not one of`},
		{"network:\n  hostResolver: systemd\n", `network.hostResolver: "systemd" is not one of hosts, dnsmasq, resolved, none`},
		{"network:\n  hostResolver: dnsmasq\n  hostResolverDir: dnsmasq.d\n", `network.hostResolverDir: "dnsmasq.d" is not an absolute path`},
		{"network:\n  hostResolverDir: /etc/dnsmasq.d\n", `network.hostResolverDir: /etc/dnsmasq.d is set but network.hostResolver is hosts, which writes no drop-in`},
		{"network:\n  bridges: [{name: a-very-long-bridge-name}]\n", "network.bridges[0].name: interface name"},
		{"network:\n  bridges: [{name: bm}]\n  veths: [{name: v0, peer: v1, master: bm, peerMaster: v0}]\n", `master of "v1" is "v0", a veth`},
		{"network:\n  vlans: [{name: v, parent: eth0, id: 5000}]\n", "id 5000 is not in 1..4094"},
		{"network:\n  bridges: [{name: bm, addresses: [10.0.0.1]}]\n", "10.0.0.1"},
	}
	parseRefuses(t, tests)
}

// parseRefuses checks that Parse refuses each case's lab file with an
// error that contains the case's want.
func parseRefuses(t *testing.T, tests []struct{ yaml, want string }) {
	t.Helper()
	for _, tt := range tests {
		_, err := Parse([]byte(tt.yaml))
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Parse(%q) = %v, want an error containing %q", tt.yaml, err, tt.want)
		}
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "lab.yaml")
	if c, err := Load(missing, false); err != nil || c.Name != DefaultName {
		t.Errorf("Load(missing, false) = %v, %v; want the default", c, err)
	}
	if _, err := Load(missing, true); err == nil {
		t.Error("Load(missing, true) = nil error, want one")
	}
	if err := os.WriteFile(missing, []byte("name: [\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(missing, true); err == nil || !strings.Contains(err.Error(), missing) {
		t.Errorf("Load(bad yaml) = %v, want an error naming the file", err)
	}
}

func TestSeedExampleIsTheDefault(t *testing.T) {
	c, err := Load(filepath.Join("testdata", "seed.yaml"), true)
	if err != nil {
		t.Fatal(err)
	}
	yes := true
	want := Default()
	want.Network.Bridges[0].LibvirtNetwork = &yes
	if d := cmp.Diff(want, c, netips); d != "" {
		t.Errorf("testdata/seed.yaml differs from Default() (-want +got):\n%s", d)
	}
}

// The BMC password can stay out of the lab file: in a 0600 file it names, or
// in BMLAB_BMC_PASSWORD, which wins.
func TestBMCPasswordSources(t *testing.T) {
	dir := t.TempDir()
	write := func(name, data string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
		os.Chmod(p, mode)
		return p
	}
	write("bmc-pass", "from-file\n", 0o600)
	write("open-pass", "x\n", 0o644)
	lab := write("lab.yaml", "cluster: {bmc: {passwordFile: bmc-pass}}\n", 0o644)
	open := write("open.yaml", "cluster: {bmc: {passwordFile: open-pass}}\n", 0o644)
	both := write("both.yaml", "cluster: {bmc: {password: a, passwordFile: bmc-pass}}\n", 0o644)

	c, err := Load(lab, true)
	if err != nil || c.Cluster.BMC.Password != "from-file" {
		t.Errorf("passwordFile: %v, password %q, want from-file", err, c.Cluster.BMC.Password)
	}
	if _, err := Load(open, true); err == nil || !strings.Contains(err.Error(), "chmod 600 "+filepath.Join(dir, "open-pass")) {
		t.Errorf("a password file others may read: %v, want the chmod that fixes it", err)
	}
	if _, err := Load(both, true); err == nil || !strings.Contains(err.Error(), "keep one") {
		t.Errorf("password and passwordFile: %v, want a refusal", err)
	}
	t.Setenv(PasswordEnv, "from-env")
	for _, p := range []string{lab, filepath.Join(dir, "missing.yaml")} {
		c, err := Load(p, false)
		if err != nil || c.Cluster.BMC.Password != "from-env" {
			t.Errorf("%s with %s set: %v, password %q, want from-env", filepath.Base(p), PasswordEnv, err, c.Cluster.BMC.Password)
		}
	}
}

// TestSyntaxErrorLine: a YAML syntax error names the line of the mistake
// as an editor counts it (or the next): an unclosed '[' or '{' on line 10,
// with lines after it or at the file's end, and a scanner's error.
func TestSyntaxErrorLine(t *testing.T) {
	head := "apiVersion: bmlab.dev/v1alpha1\nkind: Lab\nname: x\n\n\n\n\n\n"
	for _, tt := range []struct {
		name, rest string
		lines      []string // acceptable
	}{
		{"flow sequence, more after", "cluster:\n  workers: {count: [1\n  masters: {count: 3}\n", []string{"line 10:", "line 11:"}},
		{"flow sequence over lines", "network:\n  bridges: [\n    {name: a}\n  mtu: 1500\n", []string{"line 10:", "line 11:"}},
		{"flow mapping", "network:\n  bridges: [{name: a\n  mtu: 1500\n", []string{"line 10:", "line 11:"}},
		{"at the end", "\ncluster: {workers: [\n", []string{"line 10:", "line 11:"}},
		{"scanner: mapping in a scalar", "cluster:\n  apiVIP: 10.0.0.5\n    - oops: x\n", []string{"line 11:"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			data := head + tt.rest
			if n := strings.Count(head, "\n"); n != 8 {
				t.Fatalf("head has %d lines", n)
			}
			_, err := Parse([]byte(data))
			if err == nil || !strings.Contains(err.Error(), "not YAML: ") {
				t.Fatalf("Parse = %v, want a YAML syntax error", err)
			}
			if !slices.ContainsFunc(tt.lines, func(l string) bool { return strings.Contains(err.Error(), "not YAML: "+l) }) {
				t.Errorf("Parse = %v\nwant one of %q\n%s", err, tt.lines, numbered(data))
			}
		})
	}
}

func numbered(s string) string {
	var b strings.Builder
	for i, l := range strings.Split(s, "\n") {
		fmt.Fprintf(&b, "%3d %s\n", i+1, l)
	}
	return b.String()
}
