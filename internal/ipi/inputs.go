package ipi

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// PullSecretURL is where a Red Hat account gets its pull secret.
const PullSecretURL = "https://console.redhat.com/openshift/install/pull-secret"

// defaultSSHKeys are tried in order when the lab file names no key.
var defaultSSHKeys = []string{"~/.ssh/id_ed25519.pub", "~/.ssh/id_rsa.pub"}

// ReadInputs reads the pull secret and the SSH public key at the paths the
// lab plan resolved; "~/" is the home directory. Without an SSH key path
// the first default key that exists is used, or none (the installer
// accepts none; the nodes then take no SSH login). Their contents are
// Validate's to judge.
func ReadInputs(pullSecretPath, sshKeyPath string) (pullSecret, sshKey string, err error) {
	p := Home(pullSecretPath)
	b, err := os.ReadFile(p)
	if errors.Is(err, os.ErrNotExist) {
		return "", "", fmt.Errorf("cluster.pullSecret: %s does not exist; get your pull secret from %s and save it there (or point cluster.pullSecret at it)", p, PullSecretURL)
	}
	if err != nil {
		return "", "", fmt.Errorf("cluster.pullSecret: %w", err)
	}
	pullSecret = strings.TrimSpace(string(b))
	if sshKeyPath != "" {
		b, err := os.ReadFile(Home(sshKeyPath))
		if err != nil {
			return "", "", fmt.Errorf("cluster.sshKey: %w", err)
		}
		return pullSecret, strings.TrimSpace(string(b)), nil
	}
	for _, d := range defaultSSHKeys {
		if b, err := os.ReadFile(Home(d)); err == nil {
			return pullSecret, strings.TrimSpace(string(b)), nil
		}
	}
	return pullSecret, "", nil
}

// Home resolves a leading "~/" to the home directory.
func Home(path string) string {
	if rest, ok := strings.CutPrefix(path, "~/"); ok {
		if home, err := os.UserHomeDir(); err == nil {
			return filepath.Join(home, rest)
		}
	}
	return path
}
