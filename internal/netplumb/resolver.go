package netplumb

import (
	"bytes"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
)

// A host resolver drop-in sends a lab's cluster domain to the lab
// network's DNS, so that the host resolves every name of the cluster, the
// *.apps routes included, not only those a hosts file lists:
//   - NetworkManager's dnsmasq plugin (NetworkManager.conf [main]
//     dns=dnsmasq) reads /etc/NetworkManager/dnsmasq.d/*.conf: a
//     server=/DOMAIN/IP line forwards DOMAIN and every name under it to
//     IP (dnsmasq(8) --server);
//   - systemd-resolved reads /etc/systemd/resolved.conf.d/*.conf: DNS=IP
//     with Domains=~DOMAIN makes IP the server for DOMAIN, a routing-only
//     domain (resolved.conf(5)).
// The file's first line is the lab's mark: a file there without it is not
// the lab's, and is never changed or removed.

// Resolver kinds.
const (
	ResolverDnsmasq  = "dnsmasq"
	ResolverResolved = "resolved"
)

// ResolverDropIn is a lab's drop-in.
type ResolverDropIn struct {
	Kind string
	// Path is the file, <dir>/bmlab-<lab>.conf.
	Path string
	Lab  string
	// Domain is the cluster's domain; DNS the lab network's DNS server.
	Domain string
	DNS    netip.Addr
	// Apps, when valid, answers *.apps.<Domain> in the dnsmasq drop-in
	// itself: a shared libvirt network cannot hold that wildcard.
	Apps netip.Addr
}

// ResolverDropInPath is the lab's drop-in in dir.
func ResolverDropInPath(dir, lab string) string {
	return filepath.Join(dir, "bmlab-"+lab+".conf")
}

func resolverMark(lab string) string { return "# bmlab lab " + lab + ":" }

// Content is the drop-in's text.
func (d ResolverDropIn) Content() []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "%s the names of cluster %s for this host. labctl writes this\n", resolverMark(d.Lab), d.Domain)
	b.WriteString("# file (`labctl up`, `labctl net repair`) and removes it (`labctl down`).\n")
	switch d.Kind {
	case ResolverDnsmasq:
		fmt.Fprintf(&b, "server=/%s/%s\n", d.Domain, d.DNS)
		if d.Apps.IsValid() {
			fmt.Fprintf(&b, "address=/apps.%s/%s\n", d.Domain, d.Apps)
		}
	case ResolverResolved:
		fmt.Fprintf(&b, "[Resolve]\nDNS=%s\nDomains=~%s\n", d.DNS, d.Domain)
	}
	return b.Bytes()
}

// ApplyHint says how the resolver takes the file without waiting for its
// next start.
func (d ResolverDropIn) ApplyHint() string {
	if d.Kind == ResolverResolved {
		return "`systemctl restart systemd-resolved` applies it now"
	}
	return "`nmcli general reload dns-full` applies it now (NetworkManager with dns=dnsmasq)"
}

// ErrNotLabs is returned for a file at the drop-in's path that does not
// bear the lab's mark.
var ErrNotLabs = errors.New("not the lab's")

// owned reports whether path exists and bears lab's mark.
func ownedDropIn(path, lab string) (exists, owned bool, data []byte, err error) {
	data, err = os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return false, false, nil, nil
	}
	if err != nil {
		return false, false, nil, fmt.Errorf("host resolver drop-in: %w", err)
	}
	first, _, _ := strings.Cut(string(data), "\n")
	return true, strings.HasPrefix(first, resolverMark(lab)+" "), data, nil
}

// State says whether the drop-in is there as Content gives it: "" when it
// is, else what is wrong; foreign marks a file that is not the lab's.
func (d ResolverDropIn) State() (problem string, foreign bool, err error) {
	exists, owned, data, err := ownedDropIn(d.Path, d.Lab)
	switch {
	case err != nil:
		return "", false, err
	case !exists:
		return "missing", false, nil
	case !owned:
		return "a file without the lab's mark", true, nil
	case !bytes.Equal(data, d.Content()):
		return "changed", false, nil
	}
	return "", false, nil
}

// Write puts the drop-in in place unless it is there already; changed
// says whether it wrote. A file at its path that is not the lab's stops it
// (ErrNotLabs).
func (d ResolverDropIn) Write() (changed bool, err error) {
	exists, owned, data, err := ownedDropIn(d.Path, d.Lab)
	if err != nil {
		return false, err
	}
	want := d.Content()
	switch {
	case exists && !owned:
		return false, fmt.Errorf("host resolver drop-in %s: %w (its first line is not %q); move it away, or set network.hostResolver: hosts", d.Path, ErrNotLabs, resolverMark(d.Lab))
	case exists && bytes.Equal(data, want):
		return false, nil
	}
	if err := writeFile(d.Path, want); err != nil {
		return false, fmt.Errorf("host resolver drop-in: %w", err)
	}
	return true, nil
}

// RemoveResolverDropIn deletes path when it bears lab's mark; a missing
// file is no error, and a file that is not the lab's is left (foreign).
func RemoveResolverDropIn(path, lab string) (removed, foreign bool, err error) {
	exists, owned, _, err := ownedDropIn(path, lab)
	switch {
	case err != nil || !exists:
		return false, false, err
	case !owned:
		return false, true, nil
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return false, false, fmt.Errorf("host resolver drop-in: %w", err)
	}
	return true, false, nil
}

// ResolverDropInOwner says whether a drop-in exists at path and the lab
// whose mark its first line bears ("" for none).
func ResolverDropInOwner(path string) (found bool, lab string, err error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return false, "", nil
	}
	if err != nil {
		return false, "", fmt.Errorf("host resolver drop-in: %w", err)
	}
	first, _, _ := strings.Cut(string(data), "\n")
	rest, _ := strings.CutPrefix(first, "# bmlab lab ")
	if lab, _, ok := strings.Cut(rest, ": "); ok && strings.HasPrefix(first, resolverMark(lab)+" ") {
		return true, lab, nil
	}
	return true, "", nil
}
