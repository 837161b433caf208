package accounts

import (
	"strings"
	"testing"

	"golang.org/x/crypto/bcrypt"
)

// An htpasswd file is read as sushy-tools reads SUSHY_EMULATOR_AUTH_FILE:
// bcrypt entries in any of their prefixes ($2a$, $2b$ as metal3-dev-env
// writes, $2y$ as Apache's htpasswd -B writes); any other entry, a user
// given twice or no user at all is an error naming the line.
func TestHtpasswd(t *testing.T) {
	hash, err := bcrypt.GenerateFromPassword([]byte("secret-1"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	h := string(hash)
	file := "# a comment\nb2a:" + h + "\nb2b:$2b$" + h[4:] + "\n\nb2y:$2y$" + h[4:] + "  \n"
	f, err := ParseHtpasswd("f", []byte(file))
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(f.Names(), ","); got != "b2a,b2b,b2y" {
		t.Errorf("names %s", got)
	}
	for _, u := range []string{"b2a", "b2b", "b2y"} {
		if !f.Verify(u, "secret-1") || f.Verify(u, "secret-2") {
			t.Errorf("%s: the right password refused or a wrong one taken", u)
		}
	}
	if f.Verify("nobody", "secret-1") {
		t.Error("an unknown user was taken")
	}
	for _, tc := range []struct{ file, want string }{
		{"u:$apr1$abc$def\n", "line 1 (user \"u\"): not a bcrypt hash"},
		{"u:{SHA}W6ph5Mm5Pz8GgiULbPgzG37mj9g=\n", "not a bcrypt hash"},
		{"u:plain\n", "not a bcrypt hash"},
		{"\nno-colon\n", "line 2: want USER:HASH"},
		{"u:" + h + "\nu:" + h + "\n", "line 2: user \"u\" is given twice"},
		{"# nothing\n", "holds no user"},
	} {
		if _, err := ParseHtpasswd("f", []byte(tc.file)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want an error saying %q", tc.file, err, tc.want)
		}
	}
}
