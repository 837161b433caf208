package upi

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	v32 "github.com/coreos/ignition/v2/config/v3_2"
	v33 "github.com/coreos/ignition/v2/config/v3_3"
	v34 "github.com/coreos/ignition/v2/config/v3_4"
	v35 "github.com/coreos/ignition/v2/config/v3_5"
	v36 "github.com/coreos/ignition/v2/config/v3_6"
	"github.com/coreos/vcontext/report"
	"github.com/google/go-cmp/cmp"

	"github.com/bmlab/bmlab/internal/installertest"
	"github.com/bmlab/bmlab/internal/ocp"
)

// reparse parses raw with the stable package of version and returns the
// report; it is the check that an output is valid in its version.
func reparse(t *testing.T, version string, raw []byte) report.Report {
	t.Helper()
	var rpt report.Report
	var err error
	switch version {
	case "3.2.0":
		_, rpt, err = v32.Parse(raw)
	case "3.3.0":
		_, rpt, err = v33.Parse(raw)
	case "3.4.0":
		_, rpt, err = v34.Parse(raw)
	case "3.5.0":
		_, rpt, err = v35.Parse(raw)
	case "3.6.0":
		_, rpt, err = v36.Parse(raw)
	default:
		t.Fatalf("no parser for %s", version)
	}
	if err != nil {
		t.Fatalf("spec %s parse: %v: %s", version, err, rpt)
	}
	return rpt
}

// installerIgnition is what the fixture installer writes for testCluster.
func installerIgnition(t *testing.T, version string, workers int) map[string][]byte {
	t.Helper()
	ic, err := installertest.ParseInstallConfig([]byte(installConfigYAML(workers)))
	if err != nil {
		t.Fatal(err)
	}
	return installertest.IgnitionConfigs(ic, version, installertest.Manifests(ic))
}

// extraFiles stand for the static pods the caller passes.
func extraFiles(n Node) []File {
	return []File{
		{Path: "/etc/kubernetes/manifests/coredns.yaml", Mode: 0o644, Contents: []byte("kind: Pod\nmetadata:\n  name: coredns-" + n.Name + "\n")},
		{Path: "/etc/coredns/Corefile", Mode: 0o644, Contents: []byte(". {\n    forward . 10.17.0.1\n}\n")},
	}
}

// entries is the keyed content of a config, each entry as compact JSON.
type entries struct {
	version string
	files   map[string]string // path → entry, files, directories and links
	dups    []string
	units   map[string]string
	core    []string
	ign     string // the ignition section
}

func decode(t *testing.T, raw []byte) entries {
	t.Helper()
	var cfg struct {
		Ignition json.RawMessage `json:"ignition"`
		Storage  struct {
			Files, Directories, Links []json.RawMessage
		} `json:"storage"`
		Systemd struct {
			Units []json.RawMessage `json:"units"`
		} `json:"systemd"`
		Passwd passwd `json:"passwd"`
	}
	if err := json.Unmarshal(raw, &cfg); err != nil {
		t.Fatal(err)
	}
	e := entries{files: map[string]string{}, units: map[string]string{}, ign: compact(t, cfg.Ignition)}
	v, err := IgnitionVersion(raw)
	if err != nil {
		t.Fatal(err)
	}
	e.version = v
	for _, list := range [][]json.RawMessage{cfg.Storage.Files, cfg.Storage.Directories, cfg.Storage.Links} {
		for _, r := range list {
			var k struct{ Path string }
			json.Unmarshal(r, &k)
			if _, dup := e.files[k.Path]; dup {
				e.dups = append(e.dups, k.Path)
			}
			e.files[k.Path] = compact(t, r)
		}
	}
	for _, r := range cfg.Systemd.Units {
		var k struct{ Name string }
		json.Unmarshal(r, &k)
		e.units[k.Name] = compact(t, r)
	}
	e.core = cfg.Passwd.coreKeys()
	return e
}

func compact(t *testing.T, r json.RawMessage) string {
	var b bytes.Buffer
	if len(r) == 0 {
		return ""
	}
	if err := json.Compact(&b, r); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// TestMergeIgnitionEveryVersion merges into the fixture installer's
// bootstrap, master and worker configs of every supported version and
// checks the rules: same version out, valid in it (no report entries),
// installer entries unchanged, ignition section (merge[0], CA) unchanged,
// no path twice, the node's additions present, keys merged.
func TestMergeIgnitionEveryVersion(t *testing.T) {
	c := testCluster(2)
	for _, version := range IgnitionVersions {
		inst := installerIgnition(t, version, 2)
		for _, tc := range []struct {
			file string
			node Node
		}{
			{installertest.BootstrapIgn, nodeOf(c, ocp.RoleBootstrap)},
			{installertest.MasterIgn, nodeOf(c, ocp.RoleMaster)},
			{installertest.WorkerIgn, nodeOf(c, ocp.RoleWorker)},
		} {
			t.Run(version+"/"+tc.file, func(t *testing.T) {
				out, err := MergeIgnition(tc.file, inst[tc.file], tc.node, c, extraFiles(tc.node))
				if err != nil {
					t.Fatal(err)
				}
				if rpt := reparse(t, version, out); len(rpt.Entries) != 0 {
					t.Errorf("spec %s report: %s", version, rpt)
				}
				in, got := decode(t, inst[tc.file]), decode(t, out)
				if got.version != version {
					t.Errorf("version %s, want %s", got.version, version)
				}
				if got.ign != in.ign {
					t.Errorf("ignition section changed:\n%s", cmp.Diff(in.ign, got.ign))
				}
				if len(got.dups) > 0 {
					t.Errorf("paths twice: %v", got.dups)
				}
				for p, e := range in.files {
					if got.files[p] != e {
						t.Errorf("installer entry %s changed:\n%s", p, cmp.Diff(e, got.files[p]))
					}
				}
				if diff := cmp.Diff(in.units, got.units); diff != "" {
					t.Errorf("units changed (-in +out):\n%s", diff)
				}
				want := []string{HostnamePath, DispatcherPath, "/etc/kubernetes/manifests/coredns.yaml", "/etc/coredns/Corefile"}
				for _, p := range want {
					if _, ok := got.files[p]; !ok {
						t.Errorf("no %s in the output", p)
					}
				}
				if n := len(got.files) - len(in.files); n != len(want) {
					t.Errorf("output has %d more paths than the installer's, want %d", n, len(want))
				}
				wantKeys := append(append([]string(nil), in.core...), testSSHKey)
				if diff := cmp.Diff(wantKeys, got.core); diff != "" {
					t.Errorf("core's keys (-want +got):\n%s", diff)
				}
			})
		}
	}
}

// TestMergeIgnitionGolden pins the whole output for the bootstrap, a
// master and a worker at 3.2.0 and at 3.6.0 (indented for reading).
func TestMergeIgnitionGolden(t *testing.T) {
	c := testCluster(2)
	for _, version := range []string{"3.2.0", "3.6.0"} {
		inst := installerIgnition(t, version, 2)
		for _, role := range []string{ocp.RoleBootstrap, ocp.RoleMaster, ocp.RoleWorker} {
			t.Run(version+"/"+role, func(t *testing.T) {
				n := nodeOf(c, role)
				out, err := MergeIgnition(role+".ign", inst[role+".ign"], n, c, extraFiles(n))
				if err != nil {
					t.Fatal(err)
				}
				var b bytes.Buffer
				if err := json.Indent(&b, out, "", "  "); err != nil {
					t.Fatal(err)
				}
				b.WriteByte('\n')
				golden(t, filepath.Join("ignition", version, role+".ign"), b.Bytes())
			})
		}
	}
}

// TestMergeIgnitionPointerConfig checks the pointer configs' merge[0]
// source and CA by value, at the oldest and newest versions.
func TestMergeIgnitionPointerConfig(t *testing.T) {
	c := testCluster(0)
	ca := DataURL(installertest.RootCA())
	for _, version := range []string{"3.2.0", "3.6.0"} {
		inst := installerIgnition(t, version, 0)
		for _, role := range []string{"master", "worker"} {
			out, err := MergeIgnition(role+".ign", inst[role+".ign"], nodeOf(c, ocp.RoleMaster), c, nil)
			if err != nil {
				t.Fatal(err)
			}
			var cfg struct {
				Ignition struct {
					Config struct {
						Merge []struct{ Source string }
					}
					Security struct {
						TLS struct {
							CertificateAuthorities []struct{ Source string }
						}
					}
				}
			}
			if err := json.Unmarshal(out, &cfg); err != nil {
				t.Fatal(err)
			}
			want := "https://api-int.hyb.lab.test:22623/config/" + role
			if len(cfg.Ignition.Config.Merge) != 1 || cfg.Ignition.Config.Merge[0].Source != want {
				t.Errorf("%s %s: merge %+v, want [%s]", version, role, cfg.Ignition.Config.Merge, want)
			}
			if cas := cfg.Ignition.Security.TLS.CertificateAuthorities; len(cas) != 1 || cas[0].Source != ca {
				t.Errorf("%s %s: CA %+v, want the installer's", version, role, cas)
			}
		}
	}
}

// TestMergeIgnitionInstallerWins merges into hand-written configs whose
// entries collide with the additions on every kind of path.
func TestMergeIgnitionInstallerWins(t *testing.T) {
	c := testCluster(0)
	n := nodeOf(c, ocp.RoleMaster)
	const installer = `{"ignition":{"version":"3.4.0"},
"passwd":{"users":[{"name":"core","passwordHash":"$6$x","sshAuthorizedKeys":["` + testSSHKey + `","ssh-rsa AAAAother other@x"]},{"name":"other"}]},
"storage":{
 "files":[{"path":"/etc/hostname","contents":{"source":"data:,installer-name%0A"},"mode":384}],
 "directories":[{"path":"/etc/extra-dir","mode":493}],
 "links":[{"path":"/etc/extra-link","target":"/dev/null","hard":false}]},
"systemd":{"units":[{"name":"extra.service","contents":"[Service]\nExecStart=/bin/true\n","dropins":[{"name":"10-x.conf","contents":"[Service]\n"}]}]}}`
	extra := []File{
		{Path: "/etc/extra-dir", Mode: 0o644, Contents: []byte("x")},
		{Path: "/etc/extra-link", Mode: 0o644, Contents: []byte("x")},
		{Path: "/etc/systemd/system/extra.service", Mode: 0o644, Contents: []byte("x")},
		{Path: "/etc/systemd/system/extra.service.d/10-x.conf", Mode: 0o644, Contents: []byte("x")},
		{Path: "/etc/kept", Mode: 0o600, Contents: []byte("kept\n")},
	}
	out, err := MergeIgnition("custom.ign", []byte(installer), n, c, extra)
	if err != nil {
		t.Fatal(err)
	}
	if rpt := reparse(t, "3.4.0", out); len(rpt.Entries) != 0 {
		t.Errorf("report: %s", rpt)
	}
	in, got := decode(t, []byte(installer)), decode(t, out)
	if len(got.dups) > 0 {
		t.Errorf("paths twice: %v", got.dups)
	}
	for p, e := range in.files {
		if got.files[p] != e {
			t.Errorf("installer entry %s changed:\n%s", p, cmp.Diff(e, got.files[p]))
		}
	}
	var added []string
	for p := range got.files {
		if _, ok := in.files[p]; !ok {
			added = append(added, p)
		}
	}
	if diff := cmp.Diff([]string{DispatcherPath, "/etc/kept"}, added, sortStrings); diff != "" {
		t.Errorf("added paths (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(in.core, got.core); diff != "" {
		t.Errorf("core's keys changed although the installer had ours (-in +out):\n%s", diff)
	}
	if !strings.Contains(string(out), `"passwordHash":"$6$x"`) || !strings.Contains(string(out), `{"name":"other"}`) {
		t.Errorf("installer's users changed: %s", out)
	}
}

var sortStrings = cmp.Transformer("sort", func(in []string) []string {
	out := append([]string(nil), in...)
	for i := range out {
		for j := i + 1; j < len(out); j++ {
			if out[j] < out[i] {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	return out
})

func TestMergeIgnitionErrors(t *testing.T) {
	c := testCluster(0)
	n := nodeOf(c, ocp.RoleMaster)
	valid := installerIgnition(t, "3.2.0", 0)[installertest.MasterIgn]
	for _, tc := range []struct {
		name      string
		installer string
		node      Node
		extra     []File
		want      []string
		is        error
	}{
		{"3.1.0", `{"ignition":{"version":"3.1.0"}}`, n, nil,
			[]string{"x.ign", `"3.1.0"`, "3.2.0, 3.3.0, 3.4.0, 3.5.0, 3.6.0"}, ErrUnsupportedVersion},
		{"experimental", `{"ignition":{"version":"3.7.0-experimental"}}`, n, nil,
			[]string{"x.ign", `"3.7.0-experimental"`, "supported"}, ErrUnsupportedVersion},
		{"spec 2", `{"ignition":{"version":"2.2.0"}}`, n, nil, []string{`"2.2.0"`}, ErrUnsupportedVersion},
		{"not JSON", `not json`, n, nil, []string{"x.ign", "not an ignition config"}, nil},
		{"no version", `{"storage":{}}`, n, nil, []string{"x.ign", "no ignition.version"}, nil},
		{"invalid installer config", `{"ignition":{"version":"3.2.0"},"storage":{"files":[{"path":"relative"}]}}`, n, nil,
			[]string{"x.ign", "invalid ignition 3.2.0 config", "path not absolute"}, nil},
		{"extra twice", string(valid), n, []File{{Path: "/etc/a", Mode: 0o644}, {Path: "/etc/a", Mode: 0o644}},
			[]string{"/etc/a given twice"}, nil},
		{"extra hostname", string(valid), n, []File{{Path: HostnamePath, Mode: 0o644}},
			[]string{"/etc/hostname given twice"}, nil},
		{"relative extra", string(valid), n, []File{{Path: "etc/a", Mode: 0o644}}, []string{`"etc/a"`, "absolute"}, nil},
		{"bad mode", string(valid), n, []File{{Path: "/etc/a", Mode: 0o10000}}, []string{"/etc/a", "mode"}, nil},
		{"no IP", string(valid), Node{Name: "m"}, nil, []string{"node m has no IP"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := MergeIgnition("x.ign", []byte(tc.installer), tc.node, c, tc.extra)
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			if tc.is != nil && !errors.Is(err, tc.is) {
				t.Errorf("error %v is not %v", err, tc.is)
			}
		})
	}
}

// TestDispatcherScript runs the generated script with sh against a
// resolv.conf of its own: the node's nameserver goes first, once, however
// often the script runs, and other actions leave the file alone.
func TestDispatcherScript(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	script := filepath.Join(dir, "30-bmlab-resolv-prepend")
	if err := os.WriteFile(script, []byte(DispatcherScript("10.17.0.11")), 0o755); err != nil {
		t.Fatal(err)
	}
	resolv := filepath.Join(dir, "resolv.conf")
	run := func(action string) {
		t.Helper()
		cmd := exec.Command(sh, script, "enp1s0", action)
		cmd.Env = append(os.Environ(), ResolvConfEnv+"="+resolv)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s: %v: %s", action, err, out)
		}
	}
	const nm = "# Generated by NetworkManager\nsearch hyb.lab.test\nnameserver 10.17.0.1\nnameserver 10.17.0.11\n"
	for _, tc := range []struct {
		name, before string
		actions      []string
		want         string
	}{
		{"prepend", nm, []string{"up"},
			"nameserver 10.17.0.11\n# Generated by NetworkManager\nsearch hyb.lab.test\nnameserver 10.17.0.1\n"},
		{"twice", nm, []string{"up", "dhcp4-change"},
			"nameserver 10.17.0.11\n# Generated by NetworkManager\nsearch hyb.lab.test\nnameserver 10.17.0.1\n"},
		{"already first", "nameserver 10.17.0.11\nnameserver 10.17.0.1\n", []string{"connectivity-change"},
			"nameserver 10.17.0.11\nnameserver 10.17.0.1\n"},
		{"other address kept", "nameserver 10.17.0.111\n", []string{"up", "up"},
			"nameserver 10.17.0.11\nnameserver 10.17.0.111\n"},
		{"other action", nm, []string{"down", "pre-up"}, nm},
		{"empty file", "", []string{"dhcp6-change"}, "nameserver 10.17.0.11\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := os.WriteFile(resolv, []byte(tc.before), 0o644); err != nil {
				t.Fatal(err)
			}
			for _, a := range tc.actions {
				run(a)
			}
			got, err := os.ReadFile(resolv)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, string(got)); diff != "" {
				t.Errorf("resolv.conf (-want +got):\n%s", diff)
			}
		})
	}
	t.Run("missing file", func(t *testing.T) {
		os.Remove(resolv)
		run("up")
		got, _ := os.ReadFile(resolv)
		if string(got) != "nameserver 10.17.0.11\n" {
			t.Errorf("resolv.conf %q", got)
		}
	})
}

// TestMergeIgnitionTwice merges into an already merged config: nothing
// changes, so a resumed pipeline that merges its own output again is safe.
func TestMergeIgnitionTwice(t *testing.T) {
	c := testCluster(2)
	for _, version := range []string{"3.2.0", "3.6.0"} {
		for file, raw := range installerIgnition(t, version, 2) {
			if !strings.HasSuffix(file, ".ign") {
				continue
			}
			n := nodeOf(c, ocp.RoleMaster)
			once, err := MergeIgnition(file, raw, n, c, extraFiles(n))
			if err != nil {
				t.Fatal(err)
			}
			twice, err := MergeIgnition(file, once, n, c, extraFiles(n))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(string(once), string(twice)); diff != "" {
				t.Errorf("%s %s: second merge changed it:\n%s", version, file, diff)
			}
		}
	}
}

// TestNodeFilesDHCPv6DUID: an IPv6-only or dual-stack node gets the
// NetworkManager defaults that make it ask DHCPv6 with the DUID-LL of its
// MAC, which the lab network's IPv6 reservations name; an IPv4 node none.
func TestNodeFilesDHCPv6DUID(t *testing.T) {
	for _, c := range []struct {
		name string
		c    Cluster
		want bool
	}{{"v4", podCluster(0), false}, {"v6", podCluster6(0), true}, {"dual", podClusterDual(0), true}} {
		for _, n := range c.c.Nodes {
			files, err := NodeFiles(n, c.c, nil)
			if err != nil {
				t.Fatalf("%s %s: %v", c.name, n.Name, err)
			}
			var got *File
			for i := range files {
				if files[i].Path == DUIDConfPath {
					got = &files[i]
				}
			}
			if (got != nil) != c.want {
				t.Fatalf("%s %s: DUID configuration present %v, want %v", c.name, n.Name, got != nil, c.want)
			}
			if got != nil && (!strings.Contains(string(got.Contents), "\n[connection]\nipv6.dhcp-duid=ll\nipv6.dhcp-iaid=mac\n") || got.Mode != 0o644) {
				t.Fatalf("%s: %s is %q (mode %#o)", c.name, DUIDConfPath, got.Contents, got.Mode)
			}
		}
	}
}
