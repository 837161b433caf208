package vbmcd

import (
	"bytes"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/spf13/pflag"

	"github.com/bmlab/bmlab/internal/testenv"
)

// sushy-emulator's flags and configuration map onto vbmcd's flags, a flag
// winning over the file as in sushy-emulator.
func TestSushyEmulatorArgs(t *testing.T) {
	dir := t.TempDir()
	fakeConf := testenv.WriteFile(t, dir, "fake.conf", []byte(`SUSHY_EMULATOR_LISTEN_IP = u'192.168.222.1'
SUSHY_EMULATOR_LISTEN_PORT = 8001
SUSHY_EMULATOR_FAKE_DRIVER = True
SUSHY_EMULATOR_AUTH_FILE = '/root/sushy/htpasswd'
SUSHY_EMULATOR_FAKE_SYSTEMS = [{'uuid': '27946b59-9e44-4fa7-8e91-f3527a1ef094', 'name': 'f', 'power_state': 'Off', 'nics': []}]
`))
	libvirtConf := testenv.WriteFile(t, dir, "libvirt.conf", []byte(`SUSHY_EMULATOR_LIBVIRT_URI = "qemu+ssh://root@192.168.111.1/system"
SUSHY_EMULATOR_SSL_CERT = '/c.pem'
SUSHY_EMULATOR_SSL_KEY = '/k.pem'
SUSHY_EMULATOR_VMEDIA_VERIFY_SSL = True
`))
	for _, tc := range []struct {
		name  string
		args  []string
		env   map[string]string
		want  []string
		notes []string
	}{
		{"vbmctl's sushy-tools container, fake driver", []string{"--port", "8002", "--storage-pool", "default", "--libvirt-uri", "qemu:///system"},
			map[string]string{"SUSHY_EMULATOR_CONFIG": fakeConf},
			[]string{"--redfish-addr", "192.168.222.1:8002", "--media-allow-loopback", "--insecure-http", "--media-insecure-tls", "--backend", "sim", "--sim-systems", fakeConf, "--htpasswd-file", "/root/sushy/htpasswd"},
			[]string{"--storage-pool is not used"}},
		{"libvirt, TLS, verified media", []string{"--config", libvirtConf, "-i", "10.0.0.1"}, nil,
			[]string{"--redfish-addr", "10.0.0.1:8000", "--media-allow-loopback", "--tls-cert", "/c.pem", "--tls-key", "/k.pem", "--backend", "libvirt", "--libvirt-uri", "qemu+ssh://root@192.168.111.1/system"},
			[]string{"no SUSHY_EMULATOR_AUTH_FILE: Redfish asks for vbmcd's user"}},
		{"no configuration", []string{"--fake", "--debug"}, nil,
			[]string{"--redfish-addr", "127.0.0.1:8000", "--media-allow-loopback", "--insecure-http", "--media-insecure-tls", "--log-level", "debug", "--backend", "sim", "--sim-systems"},
			[]string{"the fake driver's default system"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var f sushyFlags
			fs := pflag.NewFlagSet("s", pflag.ContinueOnError)
			f.bind(fs, func(k string) string { return tc.env[k] })
			if err := fs.Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			got, notes, err := f.vbmcdArgs()
			if err != nil {
				t.Fatal(err)
			}
			if tc.name == "no configuration" {
				got = got[:len(got)-1] // a file of the fake driver's default
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("vbmcd's flags (-want +got):\n%s", diff)
			}
			for _, n := range tc.notes {
				if !strings.Contains(strings.Join(notes, "\n"), n) {
					t.Errorf("notes %q lack %q", notes, n)
				}
			}
		})
	}
}

// What vbmcd sushy-emulator cannot honour is refused before anything
// starts, with the flag or setting named and what to use instead.
func TestSushyEmulatorRefusals(t *testing.T) {
	dir := t.TempDir()
	n := 0
	conf := func(body string) string {
		n++
		return testenv.WriteFile(t, dir, fmt.Sprintf("c%d.py", n), []byte(body))
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--os-cloud", "mycloud"}, "the OpenStack driver (--os-cloud, SUSHY_EMULATOR_OS_CLOUD) is not vbmcd's"},
		{[]string{"--ironic-cloud", "c"}, "the Ironic driver (--ironic-cloud"},
		{[]string{"--config", conf("SUSHY_EMULATOR_OS_CLOUD = 'x'\n")}, "the OpenStack driver"},
		{[]string{"--config", conf("SUSHY_EMULATOR_VMWARE_DRIVER = True\n")}, "the VMware driver (SUSHY_EMULATOR_VMWARE_DRIVER) is not vbmcd's"},
		{[]string{"--vmware-host", "h"}, "unknown flag: --vmware-host; vbmcd takes sushy-emulator's --config"},
		{[]string{"--config", conf("SUSHY_EMULATOR_LISTEN_PORT = [8000]\n")}, "SUSHY_EMULATOR_LISTEN_PORT is [8000]; want a string or a number"},
		{[]string{"--config", conf("SUSHY_EMULATOR_LISTEN_PORT = get_port()\n")}, "SUSHY_EMULATOR_LISTEN_PORT"},
		{[]string{"--config", filepath.Join(dir, "absent.py")}, "no such file"},
		{[]string{"--ssl-certificate", "/c.pem"}, "a TLS certificate and its key go together"},
		{[]string{"--fake", "extra"}, "takes no arguments"},
		{[]string{"--fake", "--config", conf("SUSHY_EMULATOR_FAKE_SYSTEMS = [{'uuid': 'x', 'name': 'a'}]\n"), "-p", "1"},
			"SUSHY_EMULATOR_FAKE_SYSTEMS entry 1 (a): uuid \"x\": want a UUID"},
		// An htpasswd entry that is not bcrypt (Apache's MD5): vbmcd
		// stops before it listens, as it cannot check it.
		{[]string{"--fake", "-p", "1", "--config", conf("SUSHY_EMULATOR_AUTH_FILE = '" + conf("ironic:$apr1$x$y\n") + "'\n")},
			"line 1 (user \"ironic\"): not a bcrypt hash"},
		{[]string{"--fake", "-p", "1", "--config", conf("SUSHY_EMULATOR_AUTH_FILE = ['/a']\n")}, "SUSHY_EMULATOR_AUTH_FILE is [/a]; want the path of an htpasswd file"},
	} {
		var out, errOut bytes.Buffer
		cmd := newSushyCommand(Streams{Out: &out, ErrOut: &errOut}, func(string) string { return "" })
		cmd.SetArgs(tc.args)
		err := cmd.Execute()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("sushy-emulator %q: %v, want an error saying %q", tc.args, err, tc.want)
		}
		if len(err.Error()) > 2000 {
			t.Errorf("sushy-emulator %q: an error of %d bytes", tc.args, len(err.Error()))
		}
	}
}

// With no arguments (the image's default command) vbmcd sushy-emulator
// starts as Metal3's sushy-tools image does under metal3-dev-env: the
// configuration at ${SUSHY_TOOLS_CONFIG:-/root/sushy/conf.py} when it
// exists, every address unless the file names one.
func TestSushyEmulatorAsMetal3Image(t *testing.T) {
	dir := t.TempDir()
	withIP := testenv.WriteFile(t, dir, "ip.py", []byte("SUSHY_EMULATOR_LISTEN_IP = '192.168.111.1'\nSUSHY_EMULATOR_FAKE_DRIVER = True\n"))
	withoutIP := testenv.WriteFile(t, dir, "noip.py", []byte("SUSHY_EMULATOR_LISTEN_PORT = 8001\n"))
	for _, tc := range []struct{ env, wantArgs, wantAddr string }{
		{withIP, "--config " + withIP, "192.168.111.1:8000"},
		{withoutIP, "--config " + withoutIP + " --interface ::", "[::]:8001"},
		{filepath.Join(dir, "absent.py"), "--interface ::", "[::]:8000"},
	} {
		args := metal3ImageArgs(func(k string) string {
			if k == "SUSHY_TOOLS_CONFIG" {
				return tc.env
			}
			return ""
		})
		if got := strings.Join(args, " "); got != tc.wantArgs {
			t.Errorf("SUSHY_TOOLS_CONFIG=%s: %q, want %q", tc.env, got, tc.wantArgs)
		}
		var f sushyFlags
		fs := pflag.NewFlagSet("s", pflag.ContinueOnError)
		f.bind(fs, func(string) string { return "" })
		if err := fs.Parse(args); err != nil {
			t.Fatal(err)
		}
		got, _, err := f.vbmcdArgs()
		if err != nil || len(got) < 2 || got[1] != tc.wantAddr {
			t.Errorf("SUSHY_TOOLS_CONFIG=%s: vbmcd %q (%v), want --redfish-addr %s", tc.env, got, err, tc.wantAddr)
		}
	}
}
