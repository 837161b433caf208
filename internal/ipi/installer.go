package ipi

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/bmlab/bmlab/internal/ocp"
)

// Files in the installer's directory.
const (
	InstallerName = "openshift-install"
	// OrigFileName keeps the install-config.yaml the installer consumed
	// (it deletes its input once read into its state).
	OrigFileName = ocp.InstallConfigFile + ".orig"
	// StateFileName is where the installer keeps its assets between runs.
	StateFileName = ".openshift_install_state.json"
)

// ErrInstallerNotFound is what an *InstallerNotFoundError is.
var ErrInstallerNotFound = errors.New(InstallerName + " not found")

// ErrInstallConfigChanged means install-config.yaml differs from the one
// the installer already consumed in the same directory.
var ErrInstallConfigChanged = errors.New("install-config.yaml changed since the installer consumed it")

// InstallerNotFoundError says where openshift-install was looked for, where
// to get it and how to carry on.
type InstallerNotFoundError struct {
	Looked []string // paths and "PATH"
	Dir    string   // the directory install-config.yaml waits in
}

func (e *InstallerNotFoundError) Error() string {
	return fmt.Sprintf("%s not found (looked in: %s); %s is ready in %s.\n"+
		"Get %s for your OpenShift release from https://mirror.openshift.com/pub/openshift-v4/clients/ocp/ "+
		"(openshift-install-linux.tar.gz), or extract it from a release image with "+
		"`oc adm release extract --command=%s --to=%s RELEASE_IMAGE`; "+
		"put it in %s, on PATH, or name it in the lab file (cluster.installer), then run `labctl up` again: it resumes here.",
		InstallerName, strings.Join(e.Looked, ", "), ocp.InstallConfigFile, e.Dir, InstallerName, InstallerName, e.Dir, e.Dir)
}

// Is makes errors.Is(err, ErrInstallerNotFound) true.
func (e *InstallerNotFoundError) Is(target error) bool { return target == ErrInstallerNotFound }

// InstallerError is a run of openshift-install that failed.
type InstallerError struct {
	Err     error    // the exit status, or the context's error
	Tail    []string // the last lines it printed
	Dir     string
	Command []string // e.g. ["create", "cluster"]; empty means create cluster
}

func (e *InstallerError) Error() string {
	cmd := "create cluster"
	if len(e.Command) > 0 {
		cmd = strings.Join(e.Command, " ")
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s failed: %v; its log is %s", InstallerName, cmd, e.Err, filepath.Join(e.Dir, ocp.InstallerLogName))
	writeTail(&b, e.Tail)
	return b.String()
}

// writeTail adds a failed command's last output lines to its error's
// message, one an indented line.
func writeTail(b *strings.Builder, tail []string) {
	if len(tail) > 0 {
		b.WriteString("; last output:")
		for _, l := range tail {
			b.WriteString("\n  " + l)
		}
	}
}

func (e *InstallerError) Unwrap() error { return e.Err }

// ExitCode is the installer's exit code, or -1 when it did not exit on its
// own (cancelled, killed).
func (e *InstallerError) ExitCode() int {
	var ee *exec.ExitError
	if errors.As(e.Err, &ee) {
		return ee.ExitCode()
	}
	return -1
}

// InstallerOptions says what to run where.
type InstallerOptions struct {
	// Binary is the configured openshift-install (cluster.installer);
	// empty: Dir/openshift-install, then PATH.
	Binary string
	// Dir is the installer's directory (--dir): the lab's directory.
	Dir string
	// InstallConfig is the install-config.yaml to install, copied into Dir
	// when it is elsewhere; empty: Dir/install-config.yaml.
	InstallConfig string
	// LogLevel is --log-level (default info).
	LogLevel string
	// Env is added to the installer's environment (e.g.
	// OPENSHIFT_INSTALL_RELEASE_IMAGE_OVERRIDE=...).
	Env []string
	// StopGrace is how long the installer gets to stop after an interrupt
	// when ctx ends, before it is killed (default 30s).
	StopGrace time.Duration
}

// tailLines is how many of the last output lines an InstallerError keeps.
const tailLines = 20

// FindInstaller returns the openshift-install to run: the configured path
// (which must exist), else dir/openshift-install, else the one on PATH.
func FindInstaller(binary, dir string) (string, error) {
	if binary != "" {
		p, err := exec.LookPath(binary)
		if err != nil {
			return "", &InstallerNotFoundError{Looked: []string{binary}, Dir: dir}
		}
		return p, nil
	}
	local := filepath.Join(dir, InstallerName)
	if p, err := exec.LookPath(local); err == nil {
		return p, nil
	}
	if p, err := exec.LookPath(InstallerName); err == nil {
		return p, nil
	}
	return "", &InstallerNotFoundError{Looked: []string{local, "PATH"}, Dir: dir}
}

// ReleaseArchitecture is the architecture of the release payload the
// installer bin installs: `openshift-install version`'s "release
// architecture" line (amd64, arm64, multi...), "unknown" when it prints
// none.
func ReleaseArchitecture(ctx context.Context, bin string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, "version").Output()
	if err != nil {
		return "", fmt.Errorf("%s version: %w", bin, err)
	}
	for _, l := range strings.Split(string(out), "\n") {
		if a, ok := strings.CutPrefix(strings.TrimSpace(l), "release architecture "); ok {
			return strings.TrimSpace(a), nil
		}
	}
	return "unknown", nil
}

// RunInstaller runs `openshift-install create cluster` in opts.Dir. Every
// line the installer prints (stdout and stderr, in order) goes to onLine
// (may be nil) and to Dir/openshift-install.out. The install-config it
// consumes is kept as install-config.yaml.orig. Run again after a failure
// or an interrupt, it resumes from the installer's state as long as
// install-config.yaml is unchanged. When ctx ends the installer gets an
// interrupt, then StopGrace to exit.
func RunInstaller(ctx context.Context, opts InstallerOptions, onLine func(string)) error {
	return RunInstallerCommand(ctx, opts, []string{"create", "cluster"}, onLine)
}

// RunInstallerCommand runs `openshift-install COMMAND... --dir opts.Dir
// --log-level L` the way RunInstaller runs create cluster: output lines to
// onLine and Dir/openshift-install.out, the last ones in an
// *InstallerError, an interrupt then StopGrace when ctx ends. A "create"
// command stages install-config.yaml first (as RunInstaller does); other
// commands (wait-for) work from the installer's state alone.
func RunInstallerCommand(ctx context.Context, opts InstallerOptions, command []string, onLine func(string)) error {
	if len(command) == 0 {
		return errors.New("run " + InstallerName + ": no command")
	}
	bin, err := FindInstaller(opts.Binary, opts.Dir)
	if err != nil {
		return err
	}
	if command[0] == "create" {
		if err := stageInstallConfig(opts); err != nil {
			return err
		}
	}
	level := opts.LogLevel
	if level == "" {
		level = "info"
	}
	args := append(append([]string(nil), command...), "--dir", opts.Dir, "--log-level", level)
	tail, err := runStreaming(ctx, bin, args, opts.Dir, opts.Env, opts.StopGrace, onLine)
	if err != nil {
		return &InstallerError{Err: err, Tail: tail, Dir: opts.Dir, Command: command}
	}
	return nil
}

// runStreaming runs bin with args in dir: every output line (stdout and
// stderr, in order) goes to onLine (may be nil) and to dir/openshift-install.out (ocp.OutputLogName);
// it returns the last lines and the exit error. When ctx ends the program
// gets an interrupt, then grace (default 30s) to exit.
func runStreaming(ctx context.Context, bin string, args []string, dir string, env []string, grace time.Duration, onLine func(string)) ([]string, error) {
	out, err := os.OpenFile(filepath.Join(dir, ocp.OutputLogName), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("output log: %w", err)
	}
	defer out.Close()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = grace
	if cmd.WaitDelay == 0 {
		cmd.WaitDelay = 30 * time.Second
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("run %s: %w", bin, err)
	}
	defer pr.Close()
	cmd.Stdout, cmd.Stderr = pw, pw
	fmt.Fprintf(out, "# %s: %s\n", time.Now().UTC().Format(time.RFC3339), strings.Join(cmd.Args, " "))
	if err := cmd.Start(); err != nil {
		pw.Close()
		return nil, fmt.Errorf("run %s: %w", bin, err)
	}
	pw.Close() // the program holds the only writer now

	tail := make([]string, 0, tailLines)
	done := make(chan struct{})
	go func() {
		defer close(done)
		r := bufio.NewReader(pr)
		for {
			line, err := r.ReadString('\n')
			if line != "" {
				line = strings.TrimRight(line, "\r\n")
				fmt.Fprintln(out, line)
				if len(tail) == tailLines {
					tail = append(tail[:0], tail[1:]...)
				}
				tail = append(tail, line)
				if onLine != nil {
					onLine(line)
				}
			}
			if err != nil {
				return
			}
		}
	}()
	waitErr := cmd.Wait()
	// A child the program left behind may hold the pipe open: stop
	// reading after a moment rather than wait for it.
	select {
	case <-done:
	case <-time.After(2 * time.Second):
		pr.Close()
		<-done
	}
	if waitErr != nil && ctx.Err() != nil {
		waitErr = fmt.Errorf("%w (stopped; `labctl up` again resumes)", ctx.Err())
	}
	return tail, waitErr
}

// stageInstallConfig puts the install-config where the installer reads it
// and keeps the original, or checks that a resumed run installs the same
// one.
func stageInstallConfig(opts InstallerOptions) error {
	target := filepath.Join(opts.Dir, ocp.InstallConfigFile)
	src := filepath.Clean(opts.InstallConfig)
	if opts.InstallConfig == "" {
		src = target
	}
	data, err := os.ReadFile(src)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("read %s: %w", src, err)
	}
	have := err == nil
	orig := filepath.Join(opts.Dir, OrigFileName)
	if _, err := os.Stat(filepath.Join(opts.Dir, StateFileName)); err == nil {
		// The installer started before and keeps its install-config in its
		// state: resume, unless the lab now wants another one.
		if !have {
			return nil
		}
		prev, err := os.ReadFile(orig)
		if err != nil || !bytes.Equal(prev, data) {
			return fmt.Errorf("%w: %s differs from %s, which the installer in %s already started from; "+
				"tear the lab down (`labctl down`) or empty %s to install anew", ErrInstallConfigChanged, src, orig, opts.Dir, opts.Dir)
		}
		if src == target {
			return os.Remove(target) // the same file the state already holds
		}
		return nil
	}
	if !have {
		return fmt.Errorf("no %s to install: %s does not exist", ocp.InstallConfigFile, src)
	}
	if err := writeFile(orig, data); err != nil {
		return err
	}
	if src != target {
		return writeFile(target, data)
	}
	return nil
}
