package vbmcd

import (
	"bytes"
	"context"
	"regexp"
	"strings"
	"testing"
)

// TestPersonalitySet: --personality gives every machine a vendor's look;
// `vbmcd personality set` gives one machine another, recorded with it (the
// sim keeps it in memory, libvirt in the domain's metadata); a name vbmcd
// does not know is refused with the list of those it knows.
func TestPersonalitySet(t *testing.T) {
	var stateDir string
	addr, _ := simDaemon(t, func(c *Config) {
		c.Personality = "idrac9"
		stateDir = c.StateDir
	})
	base := "http://" + addr + "/redfish/v1"
	get := func(path string) string {
		t.Helper()
		r, err := send("GET", base+path, "admin", "sim-pass-1", "")
		if err != nil || r.Code != 200 {
			t.Fatalf("GET %s: %v %d %s", path, err, r.Code, r.Body)
		}
		return string(r.Body)
	}
	ids := regexp.MustCompile(`/Systems/([0-9a-f-]{36})`).FindAllStringSubmatch(get("/Systems"), -1)
	if len(ids) < 2 {
		t.Fatalf("systems: %v", ids)
	}
	one, other := ids[0][1], ids[1][1]
	run := func(args ...string) (string, error) {
		var out bytes.Buffer
		err := Run(context.Background(), Streams{Out: &out, ErrOut: &out}, append([]string{"personality", "--state-dir", stateDir}, args...))
		return out.String(), err
	}
	if body := get("/Systems/" + one); !strings.Contains(body, `"Manufacturer":"Dell Inc."`) {
		t.Fatalf("--personality idrac9: %s", body)
	}
	if out, err := run("set", one, "ilo6", "--quirks", "-refuse-in-post"); err != nil || !strings.Contains(out, "ilo6 -refuse-in-post") {
		t.Fatalf("personality set: %v %s", err, out)
	}
	if body := get("/Systems/" + one); !strings.Contains(body, `"Manufacturer":"HPE"`) || !strings.Contains(body, `"PostState"`) {
		t.Errorf("after set ilo6: %s", body)
	}
	if body := get("/Managers/" + one + "/VirtualMedia"); !strings.Contains(body, "/VirtualMedia/2") {
		t.Errorf("iLO media: %s", body)
	}
	if body := get("/Systems/" + other); !strings.Contains(body, `"Manufacturer":"Dell Inc."`) {
		t.Errorf("the other machine changed: %s", body)
	}
	out, err := run("list")
	if err != nil || !strings.Contains(out, "ilo6") || !strings.Contains(out, "(default)") {
		t.Errorf("personality list: %v\n%s", err, out)
	}
	for _, bad := range [][]string{{"set", one, "idrac7"}, {"set", one, "ilo6", "--quirks", "no-such"}} {
		out, err := run(bad...)
		if err == nil || !strings.Contains(err.Error(), "want one of") {
			t.Errorf("personality %v: %v %s, want a refusal naming the choices", bad, err, out)
		}
	}
	var out2 bytes.Buffer
	err = Run(context.Background(), Streams{Out: &out2, ErrOut: &out2}, []string{"--backend", "sim", "--insecure-http", "--personality", "dell", "--state-dir", t.TempDir()})
	if err == nil || !strings.Contains(err.Error(), "--personality") || !strings.Contains(err.Error(), "idrac9") {
		t.Errorf("--personality dell: %v, want the flag and the choices", err)
	}
	err = Run(context.Background(), Streams{Out: &out2, ErrOut: &out2}, []string{"--backend", "sim", "--insecure-http", "--quirk-times", "power-on-conflict=forever", "--state-dir", t.TempDir()})
	if err == nil || !strings.Contains(err.Error(), "--quirk-times") || !strings.Contains(err.Error(), "such as 30s") {
		t.Errorf("--quirk-times power-on-conflict=forever: %v, want the flag and the rule", err)
	}
}
