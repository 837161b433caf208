package ipi

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
)

// OCName is the OpenShift client.
const OCName = "oc"

// ErrOCNotFound is what an *OCNotFoundError is.
var ErrOCNotFound = errors.New(OCName + " not found")

// OCNotFoundError says where oc was looked for and where to get it.
type OCNotFoundError struct {
	Looked []string
}

func (e *OCNotFoundError) Error() string {
	return fmt.Sprintf("%s not found (looked in: %s). Get it for your OpenShift release from "+
		"https://mirror.openshift.com/pub/openshift-v4/clients/ocp/ (openshift-client-linux.tar.gz); "+
		"put it on PATH, next to openshift-install, or name it in the lab file (cluster.oc), then run the command again.",
		OCName, strings.Join(e.Looked, ", "))
}

// Is makes errors.Is(err, ErrOCNotFound) true.
func (e *OCNotFoundError) Is(target error) bool { return target == ErrOCNotFound }

// OCOptions says which oc runs where, against which cluster.
type OCOptions struct {
	// Binary is the configured oc (cluster.oc); empty: next to
	// InstallerDir's openshift-install, then PATH.
	Binary string
	// Dir is where it runs and its output log is kept.
	Dir        string
	Kubeconfig string
}

// FindOC returns the oc to run.
func FindOC(o OCOptions) (string, error) {
	if o.Binary != "" {
		p, err := exec.LookPath(o.Binary)
		if err != nil {
			return "", &OCNotFoundError{Looked: []string{o.Binary}}
		}
		return p, nil
	}
	local := filepath.Join(o.Dir, OCName)
	if p, err := exec.LookPath(local); err == nil {
		return p, nil
	}
	if p, err := exec.LookPath(OCName); err == nil {
		return p, nil
	}
	return "", &OCNotFoundError{Looked: []string{local, "PATH"}}
}

// OCError is a run of oc that failed.
type OCError struct {
	Err  error
	Tail []string
	Args []string
}

func (e *OCError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "oc %s failed: %v", strings.Join(e.Args, " "), e.Err)
	writeTail(&b, e.Tail)
	return b.String()
}

func (e *OCError) Unwrap() error { return e.Err }

// RunOC runs `oc ARGS... --kubeconfig K` in o.Dir as RunInstallerCommand
// runs the installer: lines to onLine and to Dir/openshift-install.out,
// the last ones in an *OCError.
func RunOC(ctx context.Context, o OCOptions, args []string, onLine func(string)) error {
	bin, err := FindOC(o)
	if err != nil {
		return err
	}
	full := append(append([]string(nil), args...), "--kubeconfig", o.Kubeconfig)
	tail, err := runStreaming(ctx, bin, full, o.Dir, nil, 0, onLine)
	if err != nil {
		return &OCError{Err: err, Tail: tail, Args: args}
	}
	return nil
}
