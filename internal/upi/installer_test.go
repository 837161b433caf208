package upi

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/bmlab/bmlab/internal/installertest"
	"github.com/bmlab/bmlab/internal/ipi"
	"github.com/bmlab/bmlab/internal/ocp"
)

// lines collects streamed output; OnLine runs on another goroutine.
type lines struct {
	mu  sync.Mutex
	all []string
}

func (l *lines) add(s string) { l.mu.Lock(); l.all = append(l.all, s); l.mu.Unlock() }

func (l *lines) has(sub string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.ContainsFunc(l.all, func(s string) bool { return strings.Contains(s, sub) })
}

// fixtureInstaller returns an Installer on the fixture in a new directory
// holding install-config.yaml.
func fixtureInstaller(t *testing.T, env ...string) (*Installer, *lines) {
	t.Helper()
	bin := installertest.Installer(t)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "install-config.yaml"), []byte(installConfigYAML(2)), 0o600); err != nil {
		t.Fatal(err)
	}
	out := &lines{}
	return &Installer{Options: ipi.InstallerOptions{Binary: bin, Dir: dir, Env: env}, OnLine: out.add}, out
}

// TestInstallerHybridSteps runs the flow's installer steps on the fixture
// with the package's own edits in between, at the default spec (3.2.0) and
// a newer one: manifests, their edits reaching the bootstrap's ignition,
// the merge of the real files, then wait-for with a retry.
func TestInstallerHybridSteps(t *testing.T) {
	for _, version := range []string{"", "3.5.0"} {
		t.Run("spec "+version, func(t *testing.T) {
			inst, out := fixtureInstaller(t, installertest.EnvIgnitionVersion+"="+version, installertest.EnvBootstrapExit+"=5,0")
			dir := inst.Options.Dir
			ctx := context.Background()
			if err := inst.CreateManifests(ctx); err != nil {
				t.Fatal(err)
			}
			if _, err := os.Stat(filepath.Join(dir, "install-config.yaml")); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("install-config.yaml not consumed: %v", err)
			}
			if _, err := os.Stat(filepath.Join(dir, ipi.OrigFileName)); err != nil {
				t.Errorf("no %s: %v", ipi.OrigFileName, err)
			}
			if !out.has("Manifests created in: " + filepath.Join(dir, "manifests")) {
				t.Errorf("no manifests line in %q", out.all)
			}
			c := testCluster(2)
			if _, err := EditManifests(dir, c, ManifestOptions{ApproverImage: testApproverImage}); err != nil {
				t.Fatal(err)
			}
			if err := inst.CreateIgnitionConfigs(ctx); err != nil {
				t.Fatal(err)
			}
			for _, f := range []string{"bootstrap.ign", "master.ign", "worker.ign", "auth/kubeconfig", "auth/kubeadmin-password", "metadata.json"} {
				if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
					t.Errorf("no %s: %v", f, err)
				}
			}
			boot, err := os.ReadFile(filepath.Join(dir, "bootstrap.ign"))
			if err != nil {
				t.Fatal(err)
			}
			paths := decode(t, boot).files
			for _, p := range []string{"/opt/openshift/" + IngressControllerManifest, "/opt/openshift/openshift/99_bmlab-csr-approver-4-cronjob.yaml"} {
				if _, ok := paths[p]; !ok {
					t.Errorf("bootstrap.ign lacks %s", p)
				}
			}
			for p := range paths {
				if strings.Contains(p, "machineset") || strings.Contains(p, "master-machines") || strings.Contains(p, "control-plane-machine-set") {
					t.Errorf("bootstrap.ign still carries %s", p)
				}
			}
			want := version
			if want == "" {
				want = "3.2.0"
			}
			for _, tc := range []struct {
				file string
				role string
			}{{"bootstrap.ign", ocp.RoleBootstrap}, {"master.ign", ocp.RoleMaster}, {"worker.ign", ocp.RoleWorker}} {
				raw, err := os.ReadFile(filepath.Join(dir, tc.file))
				if err != nil {
					t.Fatal(err)
				}
				merged, err := MergeIgnition(tc.file, raw, nodeOf(c, tc.role), c, nil)
				if err != nil {
					t.Fatal(err)
				}
				if v, _ := IgnitionVersion(merged); v != want {
					t.Errorf("%s: version %s, want %s", tc.file, v, want)
				}
			}

			err = inst.WaitFor(ctx, BootstrapComplete)
			var ie *ipi.InstallerError
			if !errors.As(err, &ie) || ie.ExitCode() != installertest.ExitBootstrapFailed {
				t.Fatalf("first wait-for: %v, want exit %d", err, installertest.ExitBootstrapFailed)
			}
			for _, w := range []string{"openshift-install wait-for bootstrap-complete failed: exit status 5", "Bootstrap failed to complete", "gather bootstrap"} {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q: %v", w, err)
				}
			}
			if err := inst.WaitFor(ctx, BootstrapComplete); err != nil {
				t.Fatalf("second wait-for: %v", err)
			}
			if !out.has("It is now safe to remove the bootstrap resources") {
				t.Errorf("no bootstrap-complete line")
			}
			if err := inst.WaitFor(ctx, InstallComplete); err != nil {
				t.Fatal(err)
			}
			if !out.has("Install complete!") || !out.has(filepath.Join(dir, "auth", "kubeconfig")) {
				t.Errorf("no install-complete lines in %q", out.all)
			}
			calls := []string{"create manifests", "create ignition-configs", "wait-for bootstrap-complete", "wait-for bootstrap-complete", "wait-for install-complete"}
			if diff := cmp.Diff(calls, installertest.Calls(dir)); diff != "" {
				t.Errorf("calls (-want +got):\n%s", diff)
			}
			log, _ := os.ReadFile(filepath.Join(dir, ocp.OutputLogName))
			if !strings.Contains(string(log), "Install complete!") {
				t.Errorf("%s lacks the output", ocp.OutputLogName)
			}
		})
	}
}

func TestInstallerFailures(t *testing.T) {
	ctx := context.Background()
	t.Run("install fails", func(t *testing.T) {
		inst, _ := fixtureInstaller(t, installertest.EnvInstallExit+"=6")
		if err := inst.CreateManifests(ctx); err != nil {
			t.Fatal(err)
		}
		err := inst.WaitFor(ctx, InstallComplete)
		var ie *ipi.InstallerError
		if !errors.As(err, &ie) || ie.ExitCode() != installertest.ExitInstallFailed || !strings.Contains(err.Error(), "failed to initialize the cluster") {
			t.Errorf("error %v", err)
		}
	})
	t.Run("unknown event", func(t *testing.T) {
		inst, _ := fixtureInstaller(t)
		if err := inst.WaitFor(ctx, "cluster"); err == nil || !strings.Contains(err.Error(), "want bootstrap-complete or install-complete") {
			t.Errorf("error %v", err)
		}
	})
	t.Run("no install-config", func(t *testing.T) {
		inst, _ := fixtureInstaller(t)
		os.Remove(filepath.Join(inst.Options.Dir, "install-config.yaml"))
		if err := inst.CreateManifests(ctx); err == nil || !strings.Contains(err.Error(), "install-config.yaml") {
			t.Errorf("error %v", err)
		}
	})
	t.Run("no binary", func(t *testing.T) {
		inst, _ := fixtureInstaller(t)
		inst.Options.Binary = filepath.Join(t.TempDir(), "openshift-install")
		if err := inst.CreateManifests(ctx); !errors.Is(err, ipi.ErrInstallerNotFound) {
			t.Errorf("error %v", err)
		}
	})
	t.Run("cancelled wait", func(t *testing.T) {
		inst, out := fixtureInstaller(t, installertest.EnvWait+"=10m")
		if err := inst.CreateManifests(ctx); err != nil {
			t.Fatal(err)
		}
		cctx, cancel := context.WithCancel(ctx)
		defer cancel()
		inst.OnLine = func(l string) {
			out.add(l)
			if strings.Contains(l, "Waiting up to") {
				cancel()
			}
		}
		err := inst.WaitFor(cctx, BootstrapComplete)
		if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "resumes") {
			t.Errorf("error %v, want context.Canceled", err)
		}
		if !out.has("Received interrupt signal") {
			t.Errorf("no interrupt line in %q", out.all)
		}
	})
}

// TestFixtureVersion checks the fixture's version text has the real one's
// shape.
func TestFixtureVersion(t *testing.T) {
	out, err := exec.Command(installertest.Installer(t), "version").Output()
	if err != nil {
		t.Fatal(err)
	}
	ls := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(ls) != 4 || ls[0] != "openshift-install "+installertest.Version || !strings.HasPrefix(ls[1], "built from commit ") ||
		!strings.HasPrefix(ls[2], "release image quay.io/") || ls[3] != "release architecture amd64" {
		t.Errorf("version output %q", ls)
	}
	var meta map[string]any
	if err := json.Unmarshal(installertest.IgnitionConfigs(mustIC(t), "3.2.0", nil)["metadata.json"], &meta); err != nil || meta["clusterName"] != "hyb" {
		t.Errorf("metadata.json %v %v", meta, err)
	}
}

func mustIC(t *testing.T) installertest.InstallConfig {
	ic, err := installertest.ParseInstallConfig([]byte(installConfigYAML(2)))
	if err != nil {
		t.Fatal(err)
	}
	return ic
}
