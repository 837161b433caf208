package ipi

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/bmlab/bmlab/internal/ocp"
)

// fakeInstaller is a shell script standing in for openshift-install. These
// tests exercise orchestration only (finding the binary, staging
// install-config.yaml, streaming, logs, exit codes, resuming, stopping);
// nothing here says the real installer would accept the config.
// Like the real one it consumes install-config.yaml into a state file and
// writes .openshift_install.log; FAKE_EXIT sets its exit code and
// FAKE_SLEEP makes it wait, as the real one does for bootstrap, until an
// interrupt.
const fakeInstaller = `#!/bin/sh
dir=$4
echo "args: $*"
if [ -f "$dir/install-config.yaml" ]; then
	echo "consuming install-config: $(grep -c bootMACAddress "$dir/install-config.yaml") hosts"
	rm "$dir/install-config.yaml"
	echo '{"consumed":true}' > "$dir/.openshift_install_state.json"
else
	echo "resuming from state"
fi
echo 'level=info msg="Creating infrastructure resources..."' >&2
echo "time=now level=debug full log" >> "$dir/.openshift_install.log"
if [ -n "$FAKE_SLEEP" ]; then
	trap 'kill $pid; echo "level=warning msg=\"interrupted\"" >&2; exit 130' INT
	echo "waiting"
	sleep "$FAKE_SLEEP" & pid=$!
	wait $pid
fi
if [ "${FAKE_EXIT:-0}" != 0 ]; then
	i=0; while [ $i -lt 30 ]; do echo "noise $i"; i=$((i+1)); done
	echo 'level=error msg="Bootstrap failed to complete"' >&2
fi
exit ${FAKE_EXIT:-0}
`

// installerLab makes a lab directory with a generated install-config.yaml
// and a fake openshift-install in bin/, and empties PATH of any real one.
func installerLab(t *testing.T) (dir, bin string) {
	t.Helper()
	dir = t.TempDir()
	binDir := t.TempDir()
	bin = filepath.Join(binDir, InstallerName)
	if err := os.WriteFile(bin, []byte(fakeInstaller), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", t.TempDir()+":/usr/bin:/bin")
	if err := Write(dir, validLab(t)); err != nil {
		t.Fatal(err)
	}
	return dir, bin
}

// collect gathers streamed lines; the callback runs on another goroutine.
type collect struct {
	mu    sync.Mutex
	lines []string
}

func (c *collect) add(l string) { c.mu.Lock(); c.lines = append(c.lines, l); c.mu.Unlock() }

func (c *collect) get() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.lines...)
}

func TestRunInstallerStreamsAndKeepsLogs(t *testing.T) {
	dir, bin := installerLab(t)
	want, _ := os.ReadFile(filepath.Join(dir, ocp.InstallConfigFile))
	var got collect
	if err := RunInstaller(context.Background(), InstallerOptions{Binary: bin, Dir: dir}, got.add); err != nil {
		t.Fatalf("RunInstaller: %v", err)
	}
	lines := []string{
		"args: create cluster --dir " + dir + " --log-level info",
		"consuming install-config: 5 hosts",
		`level=info msg="Creating infrastructure resources..."`,
	}
	if d := cmp.Diff(lines, got.get()); d != "" {
		t.Errorf("streamed lines (-want +got):\n%s", d)
	}
	orig, err := os.ReadFile(filepath.Join(dir, OrigFileName))
	if err != nil || string(orig) != string(want) {
		t.Errorf("%s = %v, want the install-config the installer consumed", OrigFileName, err)
	}
	if st, err := os.Stat(filepath.Join(dir, OrigFileName)); err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("%s mode: %v %v, want 0600", OrigFileName, st, err)
	}
	out, _ := os.ReadFile(filepath.Join(dir, ocp.OutputLogName))
	if !strings.HasPrefix(string(out), "# ") || !strings.HasSuffix(string(out), strings.Join(lines, "\n")+"\n") {
		t.Errorf("%s:\n%s\nwant a header line, then the streamed lines", ocp.OutputLogName, out)
	}
	if _, err := os.Stat(filepath.Join(dir, ocp.InstallerLogName)); err != nil {
		t.Errorf("the installer's own log: %v", err)
	}
}

func TestRunInstallerFailureKeepsTheTail(t *testing.T) {
	dir, bin := installerLab(t)
	err := RunInstaller(context.Background(), InstallerOptions{Binary: bin, Dir: dir, Env: []string{"FAKE_EXIT=3"}}, nil)
	var ie *InstallerError
	if !errors.As(err, &ie) {
		t.Fatalf("RunInstaller = %v, want an *InstallerError", err)
	}
	if ie.ExitCode() != 3 || len(ie.Tail) != tailLines || ie.Tail[tailLines-1] != `level=error msg="Bootstrap failed to complete"` || ie.Tail[0] != "noise 11" {
		t.Errorf("exit %d, tail %q", ie.ExitCode(), ie.Tail)
	}
	for _, want := range []string{"openshift-install create cluster failed: exit status 3", filepath.Join(dir, ".openshift_install.log"), "\n  noise 29\n  level=error"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q\nlacks %q", err, want)
		}
	}
	out, _ := os.ReadFile(filepath.Join(dir, ocp.OutputLogName))
	if !strings.Contains(string(out), "noise 0\n") {
		t.Errorf("%s lacks the lines before the tail", ocp.OutputLogName)
	}

	// Run again: the installer resumes from its state; an unchanged
	// install-config.yaml rewritten by the pipeline does not restart it.
	data, _ := os.ReadFile(filepath.Join(dir, OrigFileName))
	if err := writeFile(filepath.Join(dir, ocp.InstallConfigFile), data); err != nil {
		t.Fatal(err)
	}
	var got collect
	if err := RunInstaller(context.Background(), InstallerOptions{Binary: bin, Dir: dir}, got.add); err != nil {
		t.Fatalf("resume: %v", err)
	}
	if l := got.get(); len(l) < 2 || l[1] != "resuming from state" {
		t.Errorf("resume printed %q", l)
	}

	// A changed one is refused before the installer runs.
	if err := writeFile(filepath.Join(dir, ocp.InstallConfigFile), append(data, "# changed\n"...)); err != nil {
		t.Fatal(err)
	}
	got = collect{}
	err = RunInstaller(context.Background(), InstallerOptions{Binary: bin, Dir: dir}, got.add)
	if !errors.Is(err, ErrInstallConfigChanged) || len(got.get()) != 0 {
		t.Errorf("changed install-config: %v (ran: %q)", err, got.get())
	}
}

func TestRunInstallerCopiesAnInstallConfigFromElsewhere(t *testing.T) {
	src, bin := installerLab(t)
	dir := t.TempDir()
	// The installer is found in the lab's directory, PATH has none.
	if err := os.Rename(bin, filepath.Join(dir, InstallerName)); err != nil {
		t.Fatal(err)
	}
	var got collect
	err := RunInstaller(context.Background(), InstallerOptions{Dir: dir, InstallConfig: filepath.Join(src, ocp.InstallConfigFile)}, got.add)
	if err != nil {
		t.Fatal(err)
	}
	if l := got.get(); len(l) < 2 || l[1] != "consuming install-config: 5 hosts" {
		t.Errorf("printed %q", l)
	}
	if _, err := os.Stat(filepath.Join(src, ocp.InstallConfigFile)); err != nil {
		t.Errorf("the source install-config is gone: %v", err)
	}
}

func TestRunInstallerStopsOnCancel(t *testing.T) {
	dir, bin := installerLab(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var got collect
	onLine := func(l string) {
		got.add(l)
		if l == "waiting" {
			cancel()
		}
	}
	start := time.Now()
	err := RunInstaller(ctx, InstallerOptions{Binary: bin, Dir: dir, Env: []string{"FAKE_SLEEP=30"}, StopGrace: 10 * time.Second}, onLine)
	if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "`labctl up` again resumes") {
		t.Errorf("RunInstaller = %v, want context.Canceled and how to resume", err)
	}
	if l := got.get(); l[len(l)-1] != `level=warning msg="interrupted"` {
		t.Errorf("the installer was not interrupted gracefully: %q", l)
	}
	if d := time.Since(start); d > 8*time.Second {
		t.Errorf("stopping took %v", d)
	}
}

func TestRunInstallerAbsent(t *testing.T) {
	dir, _ := installerLab(t)
	err := RunInstaller(context.Background(), InstallerOptions{Dir: dir}, nil)
	if !errors.Is(err, ErrInstallerNotFound) {
		t.Fatalf("RunInstaller = %v, want ErrInstallerNotFound", err)
	}
	for _, want := range []string{
		"openshift-install not found (looked in: " + filepath.Join(dir, InstallerName) + ", PATH)",
		"install-config.yaml is ready in " + dir,
		"https://mirror.openshift.com/pub/openshift-v4/clients/ocp/",
		"oc adm release extract --command=openshift-install --to=" + dir,
		"cluster.installer",
		"run `labctl up` again: it resumes here",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("message lacks %q:\n%s", want, err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, ocp.InstallConfigFile)); err != nil {
		t.Errorf("install-config.yaml must stay for the next run: %v", err)
	}
	err = RunInstaller(context.Background(), InstallerOptions{Binary: "/opt/ocp/openshift-install", Dir: dir}, nil)
	if !errors.Is(err, ErrInstallerNotFound) || !strings.Contains(err.Error(), "(looked in: /opt/ocp/openshift-install)") {
		t.Errorf("configured but missing: %v", err)
	}
}

func TestReadInputs(t *testing.T) {
	lab, home := t.TempDir(), t.TempDir()
	t.Setenv("HOME", home)
	ps := filepath.Join(lab, "pull-secret.json")
	if _, _, err := ReadInputs(ps, ""); err == nil || !strings.Contains(err.Error(), "cluster.pullSecret: "+filepath.Join(lab, "pull-secret.json")+" does not exist; get your pull secret from "+PullSecretURL) {
		t.Errorf("no pull secret: %v", err)
	}
	os.WriteFile(filepath.Join(lab, "pull-secret.json"), []byte(testPullSecret+"\n"), 0o600)
	secret, key, err := ReadInputs(ps, "")
	if err != nil || secret != testPullSecret || key != "" {
		t.Errorf("no key anywhere: %q %q %v", ps, key, err)
	}
	os.MkdirAll(filepath.Join(home, ".ssh"), 0o700)
	os.WriteFile(filepath.Join(home, ".ssh", "id_rsa.pub"), []byte("ssh-rsa AAAA rsa\n"), 0o644)
	if _, key, _ := ReadInputs(ps, ""); key != "ssh-rsa AAAA rsa" {
		t.Errorf("default key = %q", key)
	}
	if _, _, err := ReadInputs(ps, "~/lab.pub"); err == nil || !strings.Contains(err.Error(), "cluster.sshKey: open "+filepath.Join(home, "lab.pub")) {
		t.Errorf("configured key missing: %v", err)
	}
}
