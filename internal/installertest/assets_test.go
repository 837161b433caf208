package installertest

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	v32 "github.com/coreos/ignition/v2/config/v3_2"
	v36 "github.com/coreos/ignition/v2/config/v3_6"
)

const installConfig = `baseDomain: lab.test
metadata:
  name: fix
pullSecret: '{"auths":{}}'
sshKey: ssh-ed25519 AAAAfixture fixture@bmlab
compute:
- name: worker
  replicas: 0
`

// TestIgnitionConfigs checks the fixture's configs are valid in their spec
// version (3.2.0 and 3.6.0 as examples) and the same on every run.
func TestIgnitionConfigs(t *testing.T) {
	ic, err := ParseInstallConfig([]byte(installConfig))
	if err != nil {
		t.Fatal(err)
	}
	for version, parse := range map[string]func([]byte) error{
		"3.2.0": func(b []byte) error { _, _, err := v32.Parse(b); return err },
		"3.6.0": func(b []byte) error { _, _, err := v36.Parse(b); return err },
	} {
		a := IgnitionConfigs(ic, version, Manifests(ic))
		b := IgnitionConfigs(ic, version, Manifests(ic))
		for _, f := range []string{BootstrapIgn, MasterIgn, WorkerIgn} {
			if err := parse(a[f]); err != nil {
				t.Errorf("%s %s: %v", version, f, err)
			}
			if !bytes.Equal(a[f], b[f]) {
				t.Errorf("%s %s differs between runs", version, f)
			}
		}
	}
	if !bytes.Contains(Manifests(ic)["manifests/cluster-scheduler-02-config.yml"], []byte("mastersSchedulable: true")) {
		t.Error("no workers, but masters not schedulable")
	}
}

func TestParseInstallConfigErrors(t *testing.T) {
	_, err := ParseInstallConfig([]byte("metadata: {}\n"))
	if err == nil || !bytes.Contains([]byte(err.Error()), []byte("metadata.name: Required value")) {
		t.Errorf("error %v", err)
	}
}

func TestExitCode(t *testing.T) {
	for _, tc := range []struct {
		list string
		call int
		want int
	}{{"", 1, 0}, {"5", 3, 5}, {"5,5,0", 1, 5}, {"5,5,0", 3, 0}, {"5,5,0", 9, 0}} {
		got, err := exitCode(tc.list, tc.call)
		if err != nil || got != tc.want {
			t.Errorf("exitCode(%q, %d) = %d, %v; want %d", tc.list, tc.call, got, err, tc.want)
		}
	}
	if _, err := exitCode("x", 1); err == nil {
		t.Error("no error for a non-integer code")
	}
}

// TestCreateSingleNode: `create single-node-ignition-config` refuses an
// install-config without the bootstrap in place or with more than one
// control-plane replica, as the installer does; a good one gives the
// bootstrap-in-place config (valid 3.2.0, with the install-to-disk script
// for the disk) and worker.ign, and neither bootstrap.ign nor master.ign.
func TestCreateSingleNode(t *testing.T) {
	for _, tc := range []struct {
		name, extra string
		code        int
		want        string
	}{
		{"no bootstrapInPlace", "controlPlane: {replicas: 1}\n", ExitInstallConfigError, "bootstrapInPlace.installationDisk: Required value"},
		{"three masters", "controlPlane: {replicas: 3}\nbootstrapInPlace: {installationDisk: /dev/vda}\n", ExitInstallConfigError, "bootstrap in place requires a single ControlPlane replica"},
		{"good", "controlPlane: {replicas: 1}\nbootstrapInPlace: {installationDisk: /dev/vda}\n", 0, "Single-Node-Ignition-Config created in"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "install-config.yaml"), []byte(installConfig+tc.extra), 0o600); err != nil {
				t.Fatal(err)
			}
			var out bytes.Buffer
			if code := Main([]string{"create", "single-node-ignition-config", "--dir", dir}, &out, &out); code != tc.code || !strings.Contains(out.String(), tc.want) {
				t.Fatalf("exit %d, want %d; output lacks %q:\n%s", code, tc.code, tc.want, out.String())
			}
			if tc.code != 0 {
				return
			}
			b, err := os.ReadFile(filepath.Join(dir, BootstrapInPlaceIgn))
			if err != nil {
				t.Fatal(err)
			}
			if _, _, err := v32.Parse(b); err != nil {
				t.Errorf("%s: %v", BootstrapInPlaceIgn, err)
			}
			if !bytes.Contains(b, []byte(InstallToDiskScript)) || !bytes.Contains(b, []byte(dataURL([]byte("#!/usr/bin/env bash\nset -euoE pipefail\n# bootstrap in place: the master's config onto the installation disk\ncoreos-installer install --ignition-file /opt/openshift/master.ign /dev/vda\nreboot\n")))) {
				t.Errorf("%s lacks the install to /dev/vda", BootstrapInPlaceIgn)
			}
			for f, want := range map[string]bool{WorkerIgn: true, "auth/kubeconfig": true, "metadata.json": true, BootstrapIgn: false, MasterIgn: false} {
				if _, err := os.Stat(filepath.Join(dir, f)); (err == nil) != want {
					t.Errorf("%s exists: %v, want %v", f, err == nil, want)
				}
			}
		})
	}
}
