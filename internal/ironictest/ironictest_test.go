package ironictest

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/bmlab/bmlab/internal/netplumb/netnstest"
	"github.com/bmlab/bmlab/internal/testenv"
)

// TestSushyRegistriesOverlay: Debian's python3-sushy 4.3.3 cannot list
// its standard message registries (the directory is missing: every task
// monitor Ironic polls died with FileNotFoundError); through the overlay
// on PYTHONPATH it lists vbmcd's Base and Update registries, and Debian's
// package directory is left as it was.
func TestSushyRegistriesOverlay(t *testing.T) {
	testenv.Integration(t)
	py := testenv.Python(t, "sushy")
	const list = `import sushy.main as m
regs = m.Sushy._get_standard_message_registry_collection(None)
print(" ".join(sorted(r.identity for r in regs)))`
	where, err := exec.Command(py, "-c", "import os, sushy; print(os.path.dirname(sushy.__file__))").Output()
	if err != nil {
		t.Fatal(err)
	}
	debian := filepath.Join(strings.TrimSpace(string(where)), registriesDir)
	_, statErr := os.Stat(debian)
	shipped := statErr == nil
	out, err := exec.Command(py, "-c", list).CombinedOutput()
	if !shipped && (err == nil || !strings.Contains(string(out), "FileNotFoundError")) {
		t.Errorf("without %s sushy lists its registries anyway (%v): %s", debian, err, out)
	}
	dir := t.TempDir()
	if err := sushyOverlay(py, dir); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(py, "-c", list)
	cmd.Env = append(cleanEnv(), "PYTHONPATH="+dir)
	got, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(got), "Base.") || !strings.Contains(string(got), "Update.") {
		t.Fatalf("sushy's standard registries through the overlay: %v\n%s", err, got)
	}
	if _, err := os.Stat(debian); !shipped && err == nil {
		t.Errorf("the overlay made %s in Debian's package", debian)
	}
}

// TestStepErrorSaysWhichStepAndWhy: a node whose BMC does not answer
// fails manage; Wait says the step, where the node is and Ironic's
// last_error. Ironic runs in a network namespace of the test's own, as on
// a lab's machine network.
func TestStepErrorSaysWhichStepAndWhy(t *testing.T) {
	testenv.Integration(t)
	ns, _ := netnstest.New(t)
	ir := Start(t, Options{Namespace: ns})
	if _, err := ir.Enroll(NodeSpec{Name: "nobody", Driver: "redfish", DriverInfo: map[string]any{
		"redfish_address": "https://127.0.0.1:9", "redfish_username": "u", "redfish_password": "p", "redfish_verify_ca": "false",
	}}); err != nil {
		t.Fatal(err)
	}
	if err := ir.Provision("nobody", "manage", nil); err != nil {
		t.Fatal(err)
	}
	_, err := ir.Wait("manage", "nobody", "manageable", 3*time.Minute)
	var se *StepError
	if !errors.As(err, &se) {
		t.Fatalf("manage of a node whose BMC does not answer: %v, want a StepError", err)
	}
	msg := err.Error()
	for _, want := range []string{"manage:", `provision state "enroll"`, "last_error:", "127.0.0.1:9"} {
		if !strings.Contains(msg, want) {
			t.Errorf("the step's error does not say %q:\n%s", want, msg)
		}
	}
	if _, err := ir.Node("no-such-node"); err == nil {
		t.Errorf("a node that does not exist was found")
	}
}
