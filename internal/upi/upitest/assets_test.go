package upitest

import (
	"bytes"
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
