package plan

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/bmlab/bmlab/internal/labconfig"
)

var update = flag.Bool("update", false, "rewrite the golden files")

func resolve(t *testing.T, lab, profile, mode string) *Plan {
	t.Helper()
	cfg, err := labconfig.Parse([]byte(lab))
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.ApplyProfile(profile); err != nil {
		t.Fatal(err)
	}
	p, err := Resolve(cfg, Options{Dir: "/labs/" + cfg.Name, Profile: profile, Mode: mode, Vbmcd: "/usr/local/bin/vbmcd", Netns: "labci"})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestGolden pins the plans of the seed lab, its tiny profile, a lab with
// TLS off and IPMI BMCs, and a hybrid lab.
func TestGolden(t *testing.T) {
	for _, tt := range []struct{ name, lab, profile, mode string }{
		{"seed", "", "", ModeIPI},
		{"tiny", "", "tiny", ModeIPI},
		{"ipmi-http", "name: plain\nnetwork: {provisioningNetwork: Managed}\ncluster: {bmc: {kind: ipmi, tls: false}, workers: {count: 0}}\n", "tiny", ModeIPI},
		{"hybrid", "name: hyb\ncluster: {image: /images/rhcos.qcow2, workers: {count: 1}}\n", "tiny", ModeHybrid},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := json.MarshalIndent(resolve(t, tt.lab, tt.profile, tt.mode), "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, '\n')
			path := filepath.Join("testdata", tt.name+".json")
			if *update {
				if err := os.WriteFile(path, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(string(want), string(got)); d != "" {
				t.Errorf("plan differs from %s (-want +got; -update rewrites it):\n%s", path, d)
			}
		})
	}
}

// TestOneAddress: install-config's address, the System URL labctl checks
// and vbmcd's listener agree on scheme, host and port, with TLS on or off.
func TestOneAddress(t *testing.T) {
	for _, tls := range []string{"true", "false"} {
		p := resolve(t, "cluster: {bmc: {tls: "+tls+"}}\n", "", ModeIPI)
		scheme := map[string]string{"true": "https", "false": "http"}[tls]
		args := strings.Join(p.Vbmcd.Args, " ")
		if (scheme == "http") != strings.Contains(args, "--insecure-http") {
			t.Errorf("tls %s: vbmcd args %q", tls, args)
		}
		for _, n := range p.Nodes {
			if !strings.HasPrefix(n.BMC.Address, "redfish-virtualmedia+"+scheme+"://192.168.111.1:8000/") ||
				!strings.HasPrefix(n.BMC.SystemURL, scheme+"://192.168.111.1:8000/redfish/v1/Systems/"+n.UUID) {
				t.Errorf("tls %s: %s has %s and %s", tls, n.Name, n.BMC.Address, n.BMC.SystemURL)
			}
		}
	}
}

// TestSecretsOffTheCommandLine: the password is in no argument and not in
// the plan's JSON.
func TestSecretsOffTheCommandLine(t *testing.T) {
	p := resolve(t, "cluster: {bmc: {password: s3cret-pw}}\n", "", ModeIPI)
	b, _ := json.Marshal(p)
	if strings.Contains(strings.Join(p.Vbmcd.Args, " "), "s3cret-pw") || strings.Contains(string(b), "s3cret-pw") {
		t.Errorf("the password leaks: args %q", p.Vbmcd.Args)
	}
	if p.BMC.Password != "s3cret-pw" {
		t.Errorf("the plan lost the password")
	}
}

func TestNATBridgeNames(t *testing.T) {
	a, b := natBridge("averylonglabname-1"), natBridge("averylonglabname-2")
	if a == b || len(a) > 15 || len(b) > 15 {
		t.Errorf("natBridge: %q and %q", a, b)
	}
	if natBridge("seed") != "bmnat-seed" {
		t.Errorf("natBridge(seed) = %q", natBridge("seed"))
	}
}

func TestBadInput(t *testing.T) {
	for _, tt := range []struct{ lab, mode, want string }{
		{"", "upi", `--mode "upi": use ipi-baremetal or hybrid`},
		{"", ModeHybrid, "cluster.image: the hybrid mode boots its nodes from an RHCOS qcow2; name it (a path or an http(s) URL) in the lab file"},
		{"cluster: {dhcpRange: {start: 192.168.111.20, end: 192.168.111.22}}\n", ModeIPI, "cluster.dhcpRange: 192.168.111.20-192.168.111.22 has no room for 4 nodes; widen it"},
	} {
		cfg, err := labconfig.Parse([]byte(tt.lab))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := Resolve(cfg, Options{Dir: "/x", Mode: tt.mode}); err == nil || err.Error() != tt.want {
			t.Errorf("Resolve(%q, %s) = %v, want %q", tt.lab, tt.mode, err, tt.want)
		}
	}
}
