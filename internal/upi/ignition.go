package upi

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/coreos/ignition/v2/config/util"
	v32 "github.com/coreos/ignition/v2/config/v3_2"
	types32 "github.com/coreos/ignition/v2/config/v3_2/types"
	v33 "github.com/coreos/ignition/v2/config/v3_3"
	v34 "github.com/coreos/ignition/v2/config/v3_4"
	v35 "github.com/coreos/ignition/v2/config/v3_5"
	v36 "github.com/coreos/ignition/v2/config/v3_6"
	"github.com/coreos/vcontext/report"
)

// Paths MergeIgnition writes on every node besides the caller's files.
const (
	HostnamePath = "/etc/hostname"
	// DispatcherPath is the NetworkManager dispatcher script that puts the
	// node's own IP first as nameserver in resolv.conf (NetworkManager runs
	// the executable files of dispatcher.d, in name order, on every
	// connection event: NetworkManager-dispatcher(8)).
	DispatcherPath = "/etc/NetworkManager/dispatcher.d/30-bmlab-resolv-prepend"
	// DUIDConfPath is the NetworkManager configuration that makes an IPv6
	// or dual-stack node ask DHCPv6 with the DUID-LL of its interface's MAC
	// (and the MAC as IAID), as OpenShift's on-prem nodes do: libvirt's
	// IPv6 reservations cannot name a MAC, so the lab network reserves
	// each node's address for that DUID (NetworkManager's default, a DUID
	// made from /etc/machine-id, would get a dynamic address that the
	// static pods' configuration does not know).
	DUIDConfPath = "/etc/NetworkManager/conf.d/01-bmlab-ipv6-duid.conf"
	// ResolvConfEnv overrides the resolv.conf the dispatcher script edits
	// (tests run the script against a file of their own).
	ResolvConfEnv = "BMLAB_RESOLV_CONF"
)

// IgnitionVersions are the ignition spec versions MergeIgnition reads and
// writes, each with the stable package of its version in
// github.com/coreos/ignition/v2/config (never the experimental one).
var IgnitionVersions = []string{"3.2.0", "3.3.0", "3.4.0", "3.5.0", "3.6.0"}

// ErrUnsupportedVersion is what an *UnsupportedVersionError is.
var ErrUnsupportedVersion = errors.New("unsupported ignition spec version")

// UnsupportedVersionError names an installer file whose ignition.version
// MergeIgnition cannot write back.
type UnsupportedVersionError struct {
	File    string
	Version string
}

func (e *UnsupportedVersionError) Error() string {
	return fmt.Sprintf("%s: ignition spec version %q is not supported (supported: %s); "+
		"use an openshift-install whose ignition configs use one of these",
		e.File, e.Version, strings.Join(IgnitionVersions, ", "))
}

// Is makes errors.Is(err, ErrUnsupportedVersion) true.
func (e *UnsupportedVersionError) Is(target error) bool { return target == ErrUnsupportedVersion }

// parseFunc parses and validates a config of one spec version.
type parseFunc func(raw []byte) (report.Report, error)

// specs maps each supported version to its stable package's Parse, which
// rejects every other version.
var specs = map[string]parseFunc{
	"3.2.0": parserOf(v32.Parse),
	"3.3.0": parserOf(v33.Parse),
	"3.4.0": parserOf(v34.Parse),
	"3.5.0": parserOf(v35.Parse),
	"3.6.0": parserOf(v36.Parse),
}

func parserOf[C any](parse func([]byte) (C, report.Report, error)) parseFunc {
	return func(raw []byte) (report.Report, error) {
		_, rpt, err := parse(raw)
		return rpt, err
	}
}

// CheckIgnition parses raw (the content of file, named in errors) with the
// stable package of its spec version: it is a config of a supported
// version that passes that version's validation.
func CheckIgnition(file string, raw []byte) error {
	version, err := IgnitionVersion(raw)
	if err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	parse, ok := specs[version]
	if !ok {
		return &UnsupportedVersionError{File: file, Version: version}
	}
	if rpt, err := parse(raw); err != nil {
		return fmt.Errorf("%s: invalid ignition %s config: %w%s", file, version, err, reportText(rpt))
	}
	return nil
}

// IgnitionVersion returns an ignition config's ignition.version.
func IgnitionVersion(raw []byte) (string, error) {
	var stub struct {
		Ignition struct {
			Version string `json:"version"`
		} `json:"ignition"`
	}
	if err := json.Unmarshal(raw, &stub); err != nil {
		return "", fmt.Errorf("not an ignition config (JSON): %w", err)
	}
	if stub.Ignition.Version == "" {
		return "", errors.New("not an ignition config: no ignition.version")
	}
	return stub.Ignition.Version, nil
}

// MergeIgnition returns the installer's ignition config (the content of
// file, named in errors) with what node needs added: its hostname, the
// cluster's SSH key for user core, the extra files (static pods and their
// configs), and the dispatcher script that puts the node's IP first in
// resolv.conf (DispatcherScript). The result is in the installer's spec
// version and passes that version's parser and validation.
//
// The installer's entries win: an addition whose path the installer already
// has (a file, directory, link or systemd unit) is left out, and every
// entry of the installer is kept as it was; the only change to an installer
// entry is the key appended to user core's sshAuthorizedKeys when it lacks
// it. Entries are carried as raw JSON, so each stays byte for byte
// (compacted) whatever wrote it. ignition.config (the pointer configs' merge[0], the
// machine-config-server URL) and ignition.security (the CA) are untouched.
func MergeIgnition(file string, installer []byte, node Node, c Cluster, extra []File) ([]byte, error) {
	if err := CheckIgnition(file, installer); err != nil {
		return nil, err
	}
	files, err := NodeFiles(node, c, extra)
	if err != nil {
		return nil, fmt.Errorf("%s for node %s: %w", file, node.Name, err)
	}
	owned, coreKeys, err := installerPaths(installer)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	out, err := appendEntries(installer, additions(files, owned, sshKeys(c.SSHKey), coreKeys))
	if err != nil {
		return nil, fmt.Errorf("%s for node %s: %w", file, node.Name, err)
	}
	if err := CheckIgnition(file+" merged for node "+node.Name, out); err != nil {
		return nil, err
	}
	return out, nil
}

// NodeFiles returns the files MergeIgnition adds for node: the extra files,
// the hostname, the resolv.conf dispatcher and, on an IPv6 or dual-stack
// node, the DHCPv6 DUID configuration, checked (absolute paths,
// valid modes, no path twice).
func NodeFiles(node Node, c Cluster, extra []File) ([]File, error) {
	if node.Name == "" {
		return nil, errors.New("node has no name")
	}
	if !node.IP.IsValid() {
		return nil, fmt.Errorf("node %s has no IP", node.Name)
	}
	files := []File{{Path: HostnamePath, Mode: 0o644, Contents: []byte(node.Name + "\n")}}
	if !c.SingleNode {
		files = append(files, File{Path: DispatcherPath, Mode: 0o755, Contents: []byte(DispatcherScript(node.IP.String()))})
	}
	if node.IP.Is6() || node.SecondaryIP.IsValid() {
		files = append(files, File{Path: DUIDConfPath, Mode: 0o644, Contents: []byte(DUIDConf)})
	}
	files = append(files, extra...)
	seen := map[string]bool{}
	for _, f := range files {
		if !path.IsAbs(f.Path) || path.Clean(f.Path) != f.Path {
			return nil, fmt.Errorf("file %q: want a clean absolute path", f.Path)
		}
		if f.Mode < 0 || f.Mode > 0o7777 {
			return nil, fmt.Errorf("file %s: mode %#o out of range (want 0 to 07777)", f.Path, f.Mode)
		}
		if seen[f.Path] {
			return nil, fmt.Errorf("file %s given twice (the hostname and %s are added by the merge itself)", f.Path, DispatcherPath)
		}
		seen[f.Path] = true
	}
	return files, nil
}

// DUIDConf is DUIDConfPath's contents: connection defaults
// (NetworkManager.conf(5), [connection] section).
const DUIDConf = `# bmlab: DHCPv6 as the lab network's reservations expect it (a DUID-LL of
# the interface's MAC, the MAC as IAID), as on OpenShift's on-prem nodes.
[connection]
ipv6.dhcp-duid=ll
ipv6.dhcp-iaid=mac
`

// DispatcherScript is the NetworkManager dispatcher script that puts
// "nameserver ip" first in resolv.conf ($BMLAB_RESOLV_CONF, else
// /etc/resolv.conf) on up, dhcp4-change, dhcp6-change and
// connectivity-change events (NetworkManager-dispatcher(8): $1 is the
// interface, $2 the action). It is idempotent: the line appears once, first;
// other lines keep their order; a file already right is not written. It
// writes in place (no rename), so a symlinked resolv.conf and the file's
// SELinux label stay.
func DispatcherScript(ip string) string {
	return `#!/bin/sh
# bmlab: this node's coredns (a static pod on the host network) answers the
# cluster's names; put it first among the nameservers NetworkManager wrote.
ip=` + ip + `
resolv="${` + ResolvConfEnv + `:-/etc/resolv.conf}"
case "$2" in
up|dhcp4-change|dhcp6-change|connectivity-change) ;;
*) exit 0 ;;
esac
old=""
if [ -e "$resolv" ]; then
	old=$(cat "$resolv") || exit 1
fi
new=$(printf '%s\n' "$old" | awk -v ip="$ip" 'BEGIN { print "nameserver " ip }
	$1 == "nameserver" && $2 == ip { next }
	NR == 1 && $0 == "" { next }
	{ print }')
[ "$new" = "$old" ] && exit 0
printf '%s\n' "$new" > "$resolv"
`
}

// sshKeys splits an authorized_keys text into its keys.
func sshKeys(text string) []string {
	var keys []string
	for _, l := range strings.Split(text, "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			keys = append(keys, l)
		}
	}
	return keys
}

// installerPaths returns every path the installer's config already owns
// (files, directories, links, and the files systemd units and drop-ins with
// contents become) and user core's SSH keys. The shape of these fields is
// the same in every 3.x spec.
func installerPaths(raw []byte) (map[string]bool, []string, error) {
	var cfg struct {
		Storage struct {
			Files, Directories, Links []struct {
				Path string `json:"path"`
			}
		} `json:"storage"`
		Systemd struct {
			Units []struct {
				Name     string  `json:"name"`
				Contents *string `json:"contents"`
				Dropins  []struct {
					Name     string  `json:"name"`
					Contents *string `json:"contents"`
				} `json:"dropins"`
			} `json:"units"`
		} `json:"systemd"`
		Passwd passwd `json:"passwd"`
	}
	if err := json.Unmarshal(raw, &cfg); err != nil {
		return nil, nil, fmt.Errorf("read the installer's entries: %w", err)
	}
	owned := map[string]bool{}
	for _, list := range [][]struct {
		Path string `json:"path"`
	}{cfg.Storage.Files, cfg.Storage.Directories, cfg.Storage.Links} {
		for _, e := range list {
			owned[e.Path] = true
		}
	}
	// Ignition writes units and drop-ins with contents to
	// /etc/systemd/system and rejects a file on the same path
	// (ErrPathConflictsSystemd).
	for _, u := range cfg.Systemd.Units {
		if u.Contents != nil && *u.Contents != "" {
			owned["/etc/systemd/system/"+u.Name] = true
		}
		for _, d := range u.Dropins {
			if d.Contents != nil && *d.Contents != "" {
				owned["/etc/systemd/system/"+u.Name+".d/"+d.Name] = true
			}
		}
	}
	return owned, cfg.Passwd.coreKeys(), nil
}

// passwd is an ignition config's passwd section as far as the merge reads
// it: its users' names and SSH keys (the same shape in every 3.x spec).
type passwd struct {
	Users []struct {
		Name string   `json:"name"`
		Keys []string `json:"sshAuthorizedKeys"`
	} `json:"users"`
}

// coreKeys are user core's SSH keys, in order.
func (p passwd) coreKeys() []string {
	var keys []string
	for _, u := range p.Users {
		if u.Name == "core" {
			keys = append(keys, u.Keys...)
		}
	}
	return keys
}

// added is what MergeIgnition adds to an installer config: files and
// user core's keys, none of which the installer has.
type added struct {
	files []types32.File
	keys  []types32.SSHAuthorizedKey
}

// additions builds the entries MergeIgnition adds with the 3.2 types: the
// fields it sets have the same JSON shape in every later 3.x spec (those
// only add fields), and the merged config is parsed by its own version.
func additions(files []File, owned map[string]bool, keys, have []string) added {
	var a added
	for _, f := range files {
		if owned[f.Path] {
			continue // the installer's entry wins
		}
		a.files = append(a.files, types32.File{
			Node: types32.Node{Path: f.Path, Overwrite: util.BoolToPtr(true)},
			FileEmbedded1: types32.FileEmbedded1{
				Mode: util.IntToPtr(f.Mode),
				Contents: types32.Resource{
					Source: util.StrToPtr(DataURL(f.Contents)),
				},
			},
		})
	}
	for _, k := range keys {
		if !slices.Contains(have, k) && !slices.Contains(a.keys, types32.SSHAuthorizedKey(k)) {
			a.keys = append(a.keys, types32.SSHAuthorizedKey(k))
		}
	}
	return a
}

// appendEntries returns the installer's config with a's files appended to
// storage.files and a's keys to user core's sshAuthorizedKeys (a new user
// core when it has none). The installer's entries are carried as raw JSON,
// so each stays byte for byte (compacted) whatever wrote it; only the
// objects that gain an entry (the top level, storage, passwd, user core)
// are re-encoded, their members in key order.
func appendEntries(installer []byte, a added) ([]byte, error) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(installer, &top); err != nil {
		return nil, fmt.Errorf("read the installer's config: %w", err)
	}
	if len(a.files) > 0 {
		var err error
		top["storage"], err = appendToList(top["storage"], "files", a.files)
		if err != nil {
			return nil, fmt.Errorf("storage: %w", err)
		}
	}
	if len(a.keys) > 0 {
		var err error
		top["passwd"], err = addCoreKeys(top["passwd"], a.keys)
		if err != nil {
			return nil, fmt.Errorf("passwd: %w", err)
		}
	}
	return json.Marshal(top)
}

// appendToList appends items to the list field of the JSON object obj
// (which may be absent).
func appendToList[T any](obj json.RawMessage, field string, items []T) (json.RawMessage, error) {
	m := map[string]json.RawMessage{}
	if len(obj) > 0 {
		if err := json.Unmarshal(obj, &m); err != nil {
			return nil, err
		}
	}
	var list []json.RawMessage
	if len(m[field]) > 0 {
		if err := json.Unmarshal(m[field], &list); err != nil {
			return nil, fmt.Errorf("%s: %w", field, err)
		}
	}
	for _, it := range items {
		b, err := json.Marshal(it)
		if err != nil {
			return nil, err
		}
		list = append(list, b)
	}
	return withField(m, field, list)
}

// addCoreKeys appends keys to the first user core of the passwd object, or
// adds user core.
func addCoreKeys(passwd json.RawMessage, keys []types32.SSHAuthorizedKey) (json.RawMessage, error) {
	m := map[string]json.RawMessage{}
	if len(passwd) > 0 {
		if err := json.Unmarshal(passwd, &m); err != nil {
			return nil, err
		}
	}
	var users []json.RawMessage
	if len(m["users"]) > 0 {
		if err := json.Unmarshal(m["users"], &users); err != nil {
			return nil, fmt.Errorf("users: %w", err)
		}
	}
	for i, u := range users {
		var name struct{ Name string }
		if err := json.Unmarshal(u, &name); err != nil {
			return nil, fmt.Errorf("users[%d]: %w", i, err)
		}
		if name.Name != "core" {
			continue
		}
		nu, err := appendToList(u, "sshAuthorizedKeys", keys)
		if err != nil {
			return nil, fmt.Errorf("users[%d]: %w", i, err)
		}
		users[i] = nu
		return withField(m, "users", users)
	}
	return appendToList(passwd, "users", []types32.PasswdUser{{Name: "core", SSHAuthorizedKeys: keys}})
}

func withField(m map[string]json.RawMessage, field string, v any) (json.RawMessage, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	m[field] = b
	return json.Marshal(m)
}

// DataURL is contents as an RFC 2397 data URL, in the form the installer
// writes its own files.
func DataURL(contents []byte) string {
	return "data:text/plain;charset=utf-8;base64," + base64.StdEncoding.EncodeToString(contents)
}

func reportText(r report.Report) string {
	if len(r.Entries) == 0 {
		return ""
	}
	return ": " + r.String()
}
