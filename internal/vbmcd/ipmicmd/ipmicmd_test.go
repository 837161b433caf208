package ipmicmd

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/bmlab/bmlab/internal/machine"
	"github.com/bmlab/bmlab/internal/sim"
)

func run(t *testing.T, svc *machine.Service, args ...string) (string, error) {
	t.Helper()
	return runBMC(t, svc, 0, args...)
}

// runBMC runs the command for a daemon whose machines' own BMCs answer
// IPMI at bmcPort (0: no --bmc-addresses).
func runBMC(t *testing.T, svc *machine.Service, bmcPort int, args ...string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	c := NewCommand(func(context.Context) (*machine.Service, func(), error) { return svc, func() {}, nil }, &out, func() int { return bmcPort })
	c.SetArgs(args)
	c.SetOut(&out)
	c.SetErr(&out)
	c.SilenceUsage = true
	err := c.ExecuteContext(context.Background())
	return out.String(), err
}

func TestSetListUnset(t *testing.T) {
	svc := machine.NewService(sim.New(3), nil)
	if _, err := run(t, svc, "set", "sim-0001", "--port", "6231", "--address", "127.0.0.1", "--username", "u1", "--password", "p1-secret"); err != nil {
		t.Fatal(err)
	}
	if _, err := run(t, svc, "set", "sim-0002", "--port", "6232"); err != nil {
		t.Fatal(err)
	}
	// The same port on a wildcard address clashes.
	if _, err := run(t, svc, "set", "sim-0003", "--port", "6231"); err == nil || !strings.Contains(err.Error(), "sim-0001 already uses") {
		t.Errorf("clash: err %v", err)
	}
	m, _ := svc.Get("sim-0001")
	if diff := cmp.Diff(&machine.IPMIEndpoint{Address: "127.0.0.1", Port: 6231}, m.Settings.IPMI); diff != "" {
		t.Errorf("endpoint (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]machine.Credential{{Username: "u1", Password: "p1-secret"}}, m.Settings.Credentials); diff != "" {
		t.Errorf("credentials (-want +got):\n%s", diff)
	}
	out, err := run(t, svc, "list", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out, "p1-secret") {
		t.Fatalf("list shows a password:\n%s", out)
	}
	var rows []Row
	if err := json.Unmarshal([]byte(out), &rows); err != nil {
		t.Fatal(err)
	}
	want := []Row{
		{Name: "sim-0001", UUID: sim.UUIDFor("sim-0001"), Address: "127.0.0.1", Port: 6231, Username: "u1", Power: "Off"},
		{Name: "sim-0002", UUID: sim.UUIDFor("sim-0002"), Port: 6232, Power: "Off"},
	}
	if diff := cmp.Diff(want, rows); diff != "" {
		t.Errorf("list (-want +got):\n%s", diff)
	}
	out, err = run(t, svc, "list")
	if err != nil || !strings.Contains(out, "127.0.0.1:6231") || !strings.Contains(out, "*:6232") || strings.Contains(out, "p1-secret") {
		t.Errorf("table: %v\n%s", err, out)
	}
	if _, err := run(t, svc, "unset", "sim-0001"); err != nil {
		t.Fatal(err)
	}
	if m, _ := svc.Get("sim-0001"); m.Settings.IPMI != nil {
		t.Errorf("unset left %+v", m.Settings.IPMI)
	}
	for _, bad := range [][]string{
		{"set", "sim-0003", "--port", "0"},
		{"set", "sim-0003", "--port", "70000"},
		{"set", "sim-0003", "--port", "623", "--address", "not-an-ip"},
		{"set", "sim-0003", "--port", "623", "--username", "x"},
		{"set", "nope", "--port", "623"},
		{"list", "-o", "yaml"},
	} {
		if _, err := run(t, svc, bad...); err == nil {
			t.Errorf("%v: no error", bad)
		}
	}
}

// TestListShowsBMCsOfTheirOwn: with --bmc-addresses, a machine whose BMC
// has an address of its own answers IPMI there (at --bmc-ipmi-port, or at
// its endpoint's port when the endpoint names no address), and list says
// so; without the flag a recorded address means nothing to IPMI.
func TestListShowsBMCsOfTheirOwn(t *testing.T) {
	svc := machine.NewService(sim.New(3), nil)
	ctx := context.Background()
	for i, edit := range []func(*machine.Settings){
		func(s *machine.Settings) { s.BMCAddress = "127.0.0.21" },
		func(s *machine.Settings) {
			s.BMCAddress, s.IPMI = "127.0.0.22", &machine.IPMIEndpoint{Port: 6232}
		},
	} {
		if _, err := svc.UpdateSettings(ctx, svc.List()[i].ID, func(s *machine.Settings) error { edit(s); return nil }); err != nil {
			t.Fatal(err)
		}
	}
	list := func(port int) []Row {
		t.Helper()
		out, err := runBMC(t, svc, port, "list", "-o", "json")
		if err != nil {
			t.Fatal(err)
		}
		var rows []Row
		if err := json.Unmarshal([]byte(out), &rows); err != nil {
			t.Fatal(err)
		}
		return rows
	}
	want := []Row{
		{Name: "sim-0001", UUID: sim.UUIDFor("sim-0001"), Address: "127.0.0.21", Port: 623, Power: "Off", BMC: "127.0.0.21"},
		{Name: "sim-0002", UUID: sim.UUIDFor("sim-0002"), Address: "127.0.0.22", Port: 6232, Power: "Off", BMC: "127.0.0.22"},
	}
	if diff := cmp.Diff(want, list(623)); diff != "" {
		t.Errorf("list with --bmc-addresses (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]Row{{Name: "sim-0002", UUID: sim.UUIDFor("sim-0002"), Port: 6232, Power: "Off"}}, list(0)); diff != "" {
		t.Errorf("list without --bmc-addresses (-want +got):\n%s", diff)
	}
	if out, err := runBMC(t, svc, 623, "list"); err != nil || !strings.Contains(out, "127.0.0.21:623") || !strings.Contains(out, "BMC") {
		t.Errorf("table: %v\n%s", err, out)
	}
}
