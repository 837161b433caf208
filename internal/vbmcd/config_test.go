package vbmcd

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/spf13/pflag"
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
		{"backend", []string{"--backend", "xen"}, nil, "", "use libvirt or sim"},
		{"tls pair", []string{"--tls-cert", "a.pem"}, nil, "", "go together"},
		{"port base", []string{"--ipmi-port-base", "70000"}, nil, "", "want a UDP port"},
		{"creds", []string{"--credentials-file", creds}, nil, "", "must both be set"},
		{"creds readable by others", []string{"--credentials-file", open}, nil, "", "chmod 600 " + open},
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
