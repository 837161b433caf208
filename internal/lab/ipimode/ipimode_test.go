package ipimode_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/bmlab/bmlab/internal/lab"
	"github.com/bmlab/bmlab/internal/lab/ipimode"
	"github.com/bmlab/bmlab/internal/lab/labtest"
)

func ipiActions(*testing.T) []lab.Action { return ipimode.Actions() }

func TestUpUntil(t *testing.T) {
	f := labtest.NewHost()
	e, rec := labtest.Env(t, f, "")
	labtest.Must(t, lab.Up(context.Background(), e, ipiActions(t), "storage"))
	if d := cmp.Diff([]string{"✓ preflight (no change)", "✓ network", "✓ storage"}, rec.Ticks()); d != "" {
		t.Errorf("ticks (-want +got):\n%s", d)
	}
	if len(f.Objs[lab.KindDomain]) != 0 || len(f.Daemons) != 0 {
		t.Errorf("--until storage went further: %v, %v", f.Objs[lab.KindDomain], f.Daemons)
	}
	st, err := lab.LoadState(e.Plan)
	labtest.Must(t, err)
	if st.Done != "storage" {
		t.Errorf("state done = %q", st.Done)
	}
	if err := lab.Up(context.Background(), e, ipiActions(t), "nodez"); err == nil || !strings.Contains(err.Error(), `--until "nodez": not a step; the steps are preflight, hosts, network, storage, nodes, bmcs, install-config, installer`) {
		t.Errorf("Up(--until nodez) = %v", err)
	}
}

func TestResumeAfterFailure(t *testing.T) {
	f := labtest.NewHost()
	e, rec := labtest.Env(t, f, "")
	f.Fail["define fk-master-2"] = errors.New("libvirt: out of memory")
	f.FailOnce = true
	err := lab.Up(context.Background(), e, ipiActions(t), "bmcs")
	if err == nil || err.Error() != "nodes: libvirt: out of memory" {
		t.Fatalf("Up with a failing define = %v", err)
	}
	if got := rec.Ticks(); got[len(got)-1] != "✗ nodes" {
		t.Errorf("ticks %v, want the last to be ✗ nodes", got)
	}
	if len(f.Objs[lab.KindDomain]) != 2 {
		t.Errorf("domains after the failure: %v", f.Objs[lab.KindDomain])
	}
	rec.Lines = nil
	f.Calls = nil
	labtest.Must(t, lab.Up(context.Background(), e, ipiActions(t), "bmcs"))
	want := []string{"✓ preflight (no change)", "✓ network (no change)", "✓ storage (no change)", "✓ nodes", "✓ bmcs"}
	if d := cmp.Diff(want, rec.Ticks()); d != "" {
		t.Errorf("resume ticks (-want +got):\n%s", d)
	}
	var defines []string
	for _, c := range f.Calls {
		if strings.HasPrefix(c, "define ") {
			defines = append(defines, c)
		}
	}
	if d := cmp.Diff([]string{"define fk-master-2", "define fk-worker-0", "define fk-worker-1"}, defines); d != "" {
		t.Errorf("resume defined (-want +got):\n%s", d)
	}
}

func TestInstallerStop(t *testing.T) {
	f := labtest.NewHost()
	e, rec := labtest.Env(t, f, "")
	labtest.Must(t, lab.Up(context.Background(), e, ipiActions(t), ""))
	ticks := rec.Ticks()
	if ticks[len(ticks)-1] != "stopped installer" || ticks[len(ticks)-2] != "✓ install-config" {
		t.Errorf("ticks %v", ticks)
	}
	if !slices.ContainsFunc(rec.Lines, func(l string) bool {
		return strings.HasPrefix(l, "installer: ") && strings.Contains(l, "openshift-install")
	}) {
		t.Errorf("no note says where openshift-install is missing: %v", rec.Lines)
	}
	st, err := lab.LoadState(e.Plan)
	labtest.Must(t, err)
	if st.Done != "install-config" {
		t.Errorf("state done = %q, want install-config (the installer is not done)", st.Done)
	}
	if _, err := os.Stat(filepath.Join(e.Plan.Installer.Dir, "install-config.yaml")); err != nil {
		t.Error(err)
	}
}

// TestDownAfterLostState: the lab's directory is gone and down runs from
// another directory; it removes every object that bears the lab's mark,
// the dangling pool proven by name and layout, and nothing foreign.
func TestDownAfterLostState(t *testing.T) {
	f := labtest.NewHost()
	dir := filepath.Join(t.TempDir(), "lab")
	e, _ := labtest.Env(t, f, dir)
	labtest.Must(t, lab.Up(context.Background(), e, ipiActions(t), "bmcs"))
	f.Put(lab.KindDomain, "fk-master-9", "")      // foreign, with a lab-like name
	f.Put(lab.KindDomain, "other-master-0", "ot") // another lab's
	labtest.Must(t, os.RemoveAll(dir))

	e2, rec := labtest.Env(t, f, filepath.Join(t.TempDir(), "elsewhere"))
	labtest.Must(t, lab.Down(context.Background(), e2, ipiActions(t)))
	for kind, objs := range f.Objs {
		for name, owner := range objs {
			if owner == "fk" {
				t.Errorf("down left %s %s", kind, name)
			}
		}
	}
	if _, ok := f.Objs[lab.KindPool]["fk-disks"]; ok {
		t.Errorf("down left the dangling pool")
	}
	if len(f.Daemons) != 0 {
		t.Errorf("down left vbmcd running: %v", f.Daemons)
	}
	if f.Objs[lab.KindDomain]["fk-master-9"] != "" || f.Objs[lab.KindDomain]["other-master-0"] != "ot" {
		t.Errorf("down touched foreign domains: %v", f.Objs[lab.KindDomain])
	}
	want := []string{"✓ remove install-config", "✓ remove bmcs", "✓ remove nodes", "✓ remove storage", "✓ remove network"}
	if d := cmp.Diff(want, rec.Ticks()); d != "" {
		t.Errorf("down ticks (-want +got):\n%s", d)
	}
}

// TestDownAggregatesErrors: one stuck domain does not keep the rest; the
// error names every failure; the steps that failed show ✗.
func TestDownAggregatesErrors(t *testing.T) {
	f := labtest.NewHost()
	e, rec := labtest.Env(t, f, "")
	labtest.Must(t, lab.Up(context.Background(), e, ipiActions(t), "bmcs"))
	f.Fail["delete fk-master-1"] = errors.New("domain is locked")
	f.Fail["delete baremetal"] = errors.New("network busy")
	rec.Lines = nil
	err := lab.Down(context.Background(), e, ipiActions(t))
	if err == nil || !strings.Contains(err.Error(), "domain is locked") || !strings.Contains(err.Error(), "network busy") {
		t.Fatalf("Down = %v, want both failures", err)
	}
	want := []string{"✓ remove install-config", "✓ remove bmcs", "✗ remove nodes", "✓ remove storage", "✗ remove network"}
	if d := cmp.Diff(want, rec.Ticks()); d != "" {
		t.Errorf("down ticks (-want +got):\n%s", d)
	}
	if len(f.Objs[lab.KindDomain]) != 1 || len(f.Objs[lab.KindPool]) != 0 {
		t.Errorf("down stopped at the first failure: %v %v", f.Objs[lab.KindDomain], f.Objs[lab.KindPool])
	}
}

// TestDownNeverTicksWithLeftovers: a Delete that returns success but leaves
// the object is caught by the look afterwards.
func TestDownNeverTicksWithLeftovers(t *testing.T) {
	f := labtest.NewHost()
	e, rec := labtest.Env(t, f, "")
	labtest.Must(t, lab.Up(context.Background(), e, ipiActions(t), "nodes"))
	f.IgnoreDelete["fk-worker-0"] = true
	rec.Lines = nil
	err := lab.Down(context.Background(), e, ipiActions(t))
	if err == nil || !strings.Contains(err.Error(), `domains of lab "fk" still there: fk-worker-0`) {
		t.Fatalf("Down = %v", err)
	}
	if !slices.Contains(rec.Ticks(), "✗ remove nodes") {
		t.Errorf("ticks %v", rec.Ticks())
	}
}

// TestClashStopsBeforeAnything: a foreign bridge and another lab's network
// stop up in preflight, with the settings that avoid them.
func TestClashStopsBeforeAnything(t *testing.T) {
	f := labtest.NewHost()
	e, _ := labtest.Env(t, f, "")
	f.Put(lab.KindLink, "baremetal", "")
	f.Put(lab.KindNetwork, "fk-machine", "other")
	err := lab.Up(context.Background(), e, ipiActions(t), "")
	for _, want := range []string{
		"preflight: lab \"fk\" would clash with what is on this host; nothing was created:",
		"link baremetal has no lab's mark: give this lab its own (network.bridges[].name)",
		"libvirt network fk-machine belongs to lab \"other\": give this lab its own (name)",
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Up = %v\nwant %q", err, want)
		}
	}
	for _, c := range f.Calls {
		if !strings.HasPrefix(c, "delete") && c != "" {
			t.Errorf("preflight failed but %q was called", c)
		}
	}
}

// TestMixedRack: a lab whose masters are Dell iDRAC 9s and workers HPE iLO
// 6s records each node's personality with its domain (the bmcs step) and
// writes install-config with the installer's scheme for each vendor: the
// Dells idrac-virtualmedia, the HPEs redfish-virtualmedia, every address
// accepted by the installer's rules.
func TestMixedRack(t *testing.T) {
	f := labtest.NewHost()
	e, _ := labtest.EnvFor(t, f, "", "name: fk\ncluster: {sshKey: id.pub, installer: /nonexistent/openshift-install, "+
		"masters: {personality: idrac9}, workers: {count: 1, personality: ilo6}}\n")
	labtest.Must(t, lab.Up(context.Background(), e, ipiActions(t), "install-config"))
	ic, err := ipimode.InstallConfig(e)
	labtest.Must(t, err)
	hosts := ic.Platform.BareMetal.Hosts
	if len(hosts) != 4 {
		t.Fatalf("%d hosts, want 3 masters and a worker", len(hosts))
	}
	for _, h := range hosts {
		want, persona := "idrac-virtualmedia+https://", "idrac9"
		if h.Role == "worker" {
			want, persona = "redfish-virtualmedia+https://", "ilo6"
		}
		if !strings.HasPrefix(h.BMC.Address, want) {
			t.Errorf("%s (%s): bmc.address %s, want %s…", h.Name, h.Role, h.BMC.Address, want)
		}
		if got := f.BMCs[h.Name].Personality; got != persona {
			t.Errorf("%s: personality recorded with the domain %q, want %q", h.Name, got, persona)
		}
	}
}
