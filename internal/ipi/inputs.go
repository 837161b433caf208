package ipi

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/bmlab/bmlab/internal/labconfig"
)

// PullSecretURL is where a Red Hat account gets its pull secret.
const PullSecretURL = "https://console.redhat.com/openshift/install/pull-secret"

// defaultSSHKeys are tried in order when the lab file names no key.
var defaultSSHKeys = []string{"~/.ssh/id_ed25519.pub", "~/.ssh/id_rsa.pub"}

// ReadInputs reads the pull secret and the SSH public key the cluster
// section names; relative paths are relative to labDir, "~/" is the home
// directory. Without cluster.sshKey the first default key that exists is
// used, or none (the installer accepts none; the nodes then take no SSH
// login). Their contents are Validate's to judge.
func ReadInputs(k labconfig.Cluster, labDir string) (pullSecret, sshKey string, err error) {
	p := resolve(k.PullSecret, labDir)
	b, err := os.ReadFile(p)
	if errors.Is(err, os.ErrNotExist) {
		return "", "", fmt.Errorf("cluster.pullSecret: %s does not exist; get your pull secret from %s and save it there (or point cluster.pullSecret at it)", p, PullSecretURL)
	}
	if err != nil {
		return "", "", fmt.Errorf("cluster.pullSecret: %w", err)
	}
	pullSecret = strings.TrimSpace(string(b))
	if k.SSHKey != "" {
		b, err := os.ReadFile(resolve(k.SSHKey, labDir))
		if err != nil {
			return "", "", fmt.Errorf("cluster.sshKey: %w", err)
		}
		return pullSecret, strings.TrimSpace(string(b)), nil
	}
	for _, d := range defaultSSHKeys {
		if b, err := os.ReadFile(resolve(d, labDir)); err == nil {
			return pullSecret, strings.TrimSpace(string(b)), nil
		}
	}
	return pullSecret, "", nil
}

func resolve(path, base string) string {
	if rest, ok := strings.CutPrefix(path, "~/"); ok {
		if home, err := os.UserHomeDir(); err == nil {
			return filepath.Join(home, rest)
		}
	}
	if filepath.IsAbs(path) {
		return path
	}
	return filepath.Join(base, path)
}
