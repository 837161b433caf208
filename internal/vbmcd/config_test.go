package vbmcd

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/spf13/pflag"

	"github.com/bmlab/bmlab/internal/virt"
)

func parse(t *testing.T, args []string, env map[string]string, file string) (Config, error) {
	t.Helper()
	var c Config
	fs := pflag.NewFlagSet("vbmcd", pflag.ContinueOnError)
	c.bind(fs)
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	err := fill(fs, file, func(k string) string { return env[k] })
	return c, err
}

func TestPrecedenceFlagsEnvFile(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "vbmcd.yaml")
	os.WriteFile(file, []byte("backend: sim\nsim-nodes: 40\nredfish-addr: 127.0.0.1:9000\ndomains: [lab-*, ocp-*]\nsim-delay: 1s\nipmi-port-base: 6230\n"), 0o600)
	c, err := parse(t, []string{"--redfish-addr", "127.0.0.1:9100"}, map[string]string{"VBMCD_SIM_NODES": "7"}, file)
	if err != nil {
		t.Fatal(err)
	}
	got := []any{c.Backend, c.SimNodes, c.RedfishAddr, c.Domains, c.SimDelay, c.IPMIPortBase, c.Username}
	want := []any{"sim", 7, "127.0.0.1:9100", []string{"lab-*", "ocp-*"}, time.Second, 6230, "admin"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// TestBMCAddressesInTheConfigFile: --bmc-addresses as a YAML list, and
// as a map of machines to addresses.
func TestBMCAddressesInTheConfigFile(t *testing.T) {
	dir := t.TempDir()
	for name, tc := range map[string]struct {
		yaml string
		want []string
	}{
		"list": {"bmc-addresses: [127.0.0.10-127.0.0.19, 'master-0=fd00::5']\n", []string{"127.0.0.10-127.0.0.19", "master-0=fd00::5"}},
		"map":  {"bmc-addresses: {worker-0: 10.0.0.6, master-0: 10.0.0.5}\n", []string{"master-0=10.0.0.5", "worker-0=10.0.0.6"}},
	} {
		t.Run(name, func(t *testing.T) {
			file := filepath.Join(dir, name+".yaml")
			os.WriteFile(file, []byte(tc.yaml), 0o600)
			c, err := parse(t, nil, nil, file)
			if err == nil {
				err = c.validate()
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, c.BMCAddresses); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestBadSettingsSayWhatIsWrong(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	os.WriteFile(bad, []byte("redfish-adr: x\n"), 0o600)
	creds := filepath.Join(dir, "creds.yaml")
	os.WriteFile(creds, []byte("username: u\n"), 0o600)
	open := filepath.Join(dir, "open.yaml")
	os.WriteFile(open, []byte("username: u\npassword: p\n"), 0o600)
	os.Chmod(open, 0o644) // past the umask
	tests := []struct {
		name string
		args []string
		env  map[string]string
		file string
		want string
	}{
		{"unknown key", nil, nil, bad, `unknown setting "redfish-adr"`},
		{"bad env", nil, map[string]string{"VBMCD_SIM_NODES": "many"}, "", "VBMCD_SIM_NODES"},
		{"backend", []string{"--backend", "xen"}, nil, "", "use libvirt, kubevirt or sim"},
		{"tls pair", []string{"--tls-cert", "a.pem"}, nil, "", "go together"},
		{"tls version", []string{"--tls-min-version", "1.1"}, nil, "", "want 1.2 or 1.3"},
		{"tls suite", []string{"--tls-cipher-suites", "TLS_RSA_WITH_RC4_128_SHA"}, nil, "", "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"},
		{"tls suites without HTTP/2's", []string{"--tls-cipher-suites", "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384"}, nil, "", "HTTP/2 needs"},
		{"tls suites with 1.3", []string{"--tls-min-version", "1.3", "--tls-cipher-suites", "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"}, nil, "", "apply to TLS 1.2"},
		{"port base", []string{"--ipmi-port-base", "70000"}, nil, "", "want a UDP port"},
		{"ipmi addr with a port", []string{"--ipmi-addr", "[fd00::1]:623"}, nil, "", "want an IP address"},
		{"kubevirt media url", []string{"--kubevirt-media-addr", ":8081", "--kubevirt-media-url", "vbmcd.lab.svc:8081"}, nil, "", "must be an http:// or https:// URL"},
		{"kubevirt media url alone", []string{"--kubevirt-media-url", "http://vbmcd.lab.svc:8081"}, nil, "", "needs --kubevirt-media-addr"},
		{"creds", []string{"--credentials-file", creds}, nil, "", "must both be set"},
		{"creds readable by others", []string{"--credentials-file", open}, nil, "", "chmod 600 " + open},
		{"fault without machine", []string{"--fault", `{"latency":"1s"}`}, nil, "", "name the machine"},
		{"fault key", []string{"--fault", `{"machine":"a","latancy":"1s"}`}, nil, "", `unknown field "latancy"`},
		{"fault duration", []string{"--fault", `{"machine":"a","down":"soon"}`}, nil, "", `down "soon": want a duration`},
		{"bmc address", []string{"--bmc-addresses", "127.0.0.300"}, nil, "", "is not an IP address; want ADDRESS, FIRST-LAST or MACHINE=ADDRESS"},
		{"bmc range backwards", []string{"--bmc-addresses", "127.0.0.20-127.0.0.10"}, nil, "", "write the lower address first"},
		{"bmc range families", []string{"--bmc-addresses", "127.0.0.10-fd00::1"}, nil, "", "of one family"},
		{"bmc range too big", []string{"--bmc-addresses", "10.0.0.0-10.255.0.0"}, nil, "", "at most 65536 addresses"},
		{"bmc address twice", []string{"--bmc-addresses", "127.0.0.10-127.0.0.20,m0=127.0.0.15"}, nil, "", "127.0.0.15 is given twice"},
		{"bmc pin twice", []string{"--bmc-addresses", "m0=127.0.0.15,M0=127.0.0.16"}, nil, "", "pinned twice"},
		{"bmc wildcard", []string{"--bmc-addresses", "0.0.0.0"}, nil, "", "cannot be one BMC's address"},
		{"bmc port base", []string{"--bmc-addresses", "127.0.0.10", "--ipmi-port-base", "6230"}, nil, "", "drop --ipmi-port-base"},
		{"bmc port", []string{"--bmc-addresses", "127.0.0.10", "--bmc-ipmi-port", "70000"}, nil, "", "--bmc-ipmi-port 70000: want a UDP port"},
		{"bmc and service listener", []string{"--bmc-addresses", "127.0.0.10", "--redfish-addr", ":443"}, nil, "", "collide"},
		{"bmc ca pair", []string{"--tls-ca-cert", "ca.crt"}, nil, "", "--tls-ca-cert and --tls-ca-key go together"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := parse(t, tt.args, tt.env, tt.file)
			if err == nil {
				err = c.validate()
			}
			if err == nil {
				_, _, err = c.credentials()
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err %v, want it to mention %q", err, tt.want)
			}
		})
	}
}

func TestServiceUUIDIsKept(t *testing.T) {
	dir := t.TempDir()
	a, err := serviceUUID(dir)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := serviceUUID(dir)
	if a != b || len(a) != 36 {
		t.Errorf("uuid %q then %q", a, b)
	}
}

func TestLibvirtHostsFromFlagsAndFile(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "vbmcd.yaml")
	os.WriteFile(file, []byte("domains: [lab-*]\nlibvirt:\n- {name: a, uri: 'qemu+tls://10.9.0.1/system?pkipath=/etc/pki/a'}\n- {name: b, uri: 'qemu+ssh://root@10.9.0.2/system', domains: [b-*]}\n"), 0o600)
	tests := []struct {
		name string
		args []string
		file string
		want []virt.Host
	}{
		{"default", nil, "", []virt.Host{{URI: "qemu:///system"}}},
		{"one unnamed keeps no name", []string{"--libvirt-uri", "qemu+unix:///system?socket=/run/x.sock"}, "",
			[]virt.Host{{URI: "qemu+unix:///system?socket=/run/x.sock"}}},
		{"named and unnamed", []string{"--libvirt-uri", "left=qemu+tcp://10.9.0.1:16509/system", "--libvirt-uri", "qemu+tcp://10.9.0.2/system", "--libvirt-uri", "qemu:///system"}, "",
			[]virt.Host{{Name: "left", URI: "qemu+tcp://10.9.0.1:16509/system"}, {Name: "10.9.0.2", URI: "qemu+tcp://10.9.0.2/system"}, {Name: "local", URI: "qemu:///system"}}},
		{"file list, filters default to --domains", nil, file,
			[]virt.Host{{Name: "a", URI: "qemu+tls://10.9.0.1/system?pkipath=/etc/pki/a", Domains: []string{"lab-*"}}, {Name: "b", URI: "qemu+ssh://root@10.9.0.2/system", Domains: []string{"b-*"}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := parse(t, tt.args, nil, tt.file)
			if err != nil {
				t.Fatal(err)
			}
			got, err := c.libvirtHosts()
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
	for _, bad := range [][]string{
		{"--libvirt-uri", "xen://h/system"},
		{"--libvirt-uri", "qemu+tcp:///system"},
		{"--libvirt-uri", "a=qemu+tcp://h1/system", "--libvirt-uri", "a=qemu+tcp://h2/system"},
	} {
		c, err := parse(t, bad, nil, "")
		if err == nil {
			err = c.validate()
		}
		if err == nil {
			t.Errorf("%v: accepted", bad)
		}
	}
}

// The config file's fault: list is one object per machine, as the flag.
func TestFaultsFromConfigFile(t *testing.T) {
	file := filepath.Join(t.TempDir(), "vbmcd.yaml")
	os.WriteFile(file, []byte("fault:\n- {machine: node-0, latency: 300ms, httpErrors: 2}\n- {machine: node-1, refusePowerOn: true, mediaStuck: true, down: 30s}\n"), 0o600)
	c, err := parse(t, nil, nil, file)
	if err != nil {
		t.Fatal(err)
	}
	want := []faultSpec{
		{Machine: "node-0", Latency: "300ms", HTTPErrors: 2},
		{Machine: "node-1", RefusePowerOn: true, MediaStuck: true, Down: "30s"},
	}
	if diff := cmp.Diff(want, c.Faults); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// TestInbandDir: where the in-band sockets go, and that --ipmi off or
// --ipmi-inband off wires no KCS (docs/vbmcd.md's flag table).
func TestInbandDir(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"libvirt default", []string{"--backend", "libvirt"}, DefaultInbandDir},
		{"libvirt, own dir", []string{"--backend", "libvirt", "--ipmi-inband-dir", "/run/k"}, "/run/k"},
		{"sim, none given", []string{"--backend", "sim"}, ""},
		{"sim, dir given", []string{"--backend", "sim", "--ipmi-inband-dir", "/run/k"}, "/run/k"},
		{"ipmi off", []string{"--backend", "libvirt", "--ipmi=false", "--ipmi-inband-dir", "/run/k"}, ""},
		{"inband off", []string{"--backend", "libvirt", "--ipmi-inband=false"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := parse(t, tc.args, nil, "")
			if err != nil {
				t.Fatalf("parse %v: %v", tc.args, err)
			}
			if diff := cmp.Diff(tc.want, c.inbandDir()); diff != "" {
				t.Errorf("inbandDir() of %v (-want +got):\n%s", tc.args, diff)
			}
		})
	}
}
