package accounts

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

	"golang.org/x/crypto/bcrypt"
)

// Htpasswd is the users of an Apache htpasswd file whose entries are
// bcrypt hashes (htpasswd -B), as sushy-tools reads its
// SUSHY_EMULATOR_AUTH_FILE (through ironic-lib's basic authentication,
// which takes bcrypt entries only). Such a user has no password vbmcd can
// read, so it is a Redfish user only: IPMI's RAKP needs the password
// itself.
type Htpasswd struct {
	users map[string][]byte
	// dummy is compared against for a name the file lacks, at the cost of
	// the file's dearest entry: a refusal takes as long whether the name
	// is there or not.
	dummy []byte
}

// Bounds of an htpasswd file.
const (
	maxHtpasswdBytes   = 1 << 20
	maxHtpasswdEntries = 10_000
)

// LoadHtpasswd reads an htpasswd file of bcrypt entries; any other entry,
// or an empty file, is an error naming its line.
func LoadHtpasswd(path string) (*Htpasswd, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("htpasswd file: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxHtpasswdBytes+1))
	if err != nil {
		return nil, fmt.Errorf("htpasswd file %s: %w", path, err)
	}
	if len(data) > maxHtpasswdBytes {
		return nil, fmt.Errorf("htpasswd file %s is larger than %d MiB", path, maxHtpasswdBytes>>20)
	}
	return ParseHtpasswd(path, data)
}

// ParseHtpasswd reads an htpasswd file's bytes; name is how errors call it.
func ParseHtpasswd(name string, data []byte) (*Htpasswd, error) {
	h := &Htpasswd{users: map[string][]byte{}}
	most := 0
	for i, line := range bytes.Split(data, []byte("\n")) {
		l := strings.TrimSpace(string(line))
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		user, hash, ok := strings.Cut(l, ":")
		if !ok || user == "" {
			return nil, fmt.Errorf("htpasswd file %s, line %d: want USER:HASH", name, i+1)
		}
		cost, err := bcrypt.Cost([]byte(hash))
		if err != nil || !strings.HasPrefix(hash, "$2") {
			return nil, fmt.Errorf("htpasswd file %s, line %d (user %q): not a bcrypt hash; vbmcd, as sushy-tools, reads bcrypt entries only (htpasswd -B makes them)",
				name, i+1, LogName(user))
		}
		if _, dup := h.users[user]; dup {
			return nil, fmt.Errorf("htpasswd file %s, line %d: user %q is given twice", name, i+1, LogName(user))
		}
		if len(h.users) == maxHtpasswdEntries {
			return nil, fmt.Errorf("htpasswd file %s holds more than %d users", name, maxHtpasswdEntries)
		}
		h.users[user] = []byte(hash)
		most = max(most, cost)
	}
	if len(h.users) == 0 {
		return nil, fmt.Errorf("htpasswd file %s holds no user", name)
	}
	dummy, err := bcrypt.GenerateFromPassword([]byte("no user has this password"), most)
	if err != nil {
		return nil, fmt.Errorf("htpasswd file %s: %w", name, err)
	}
	h.dummy = dummy
	return h, nil
}

// Names are the file's users, sorted.
func (h *Htpasswd) Names() []string {
	out := make([]string, 0, len(h.users))
	for u := range h.users {
		out = append(out, u)
	}
	sort.Strings(out)
	return out
}

// Verify reports whether pass is user's password. A name the file lacks
// costs one comparison at the file's highest cost, as a known one does.
func (h *Htpasswd) Verify(user, pass string) bool {
	hash, ok := h.users[user]
	if !ok {
		_ = bcrypt.CompareHashAndPassword(h.dummy, []byte(pass))
		return false
	}
	return bcrypt.CompareHashAndPassword(hash, []byte(pass)) == nil
}
