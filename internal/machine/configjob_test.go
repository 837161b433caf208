package machine_test

import (
	"context"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/bmlab/bmlab/internal/machine"
)

// TestConfigurationJob: a job that sets the override only is done at once;
// one that stages BIOS attributes and a boot order waits for the next boot,
// after which the machine has them; one that asks for what the machine has
// changes nothing; a refused part changes nothing at all.
func TestConfigurationJob(t *testing.T) {
	ctx := context.Background()
	svc, _, id := newSvc(t)
	m, _ := svc.Get(id)
	order := m.BootOrder()
	reversed := make([]string, len(order))
	for i, r := range order {
		reversed[len(order)-1-i] = r
	}

	now, err := svc.ApplyConfiguration(ctx, id, machine.Configuration{Boot: &machine.BootPatch{Target: ptr(machine.BootCd), Enabled: ptr(machine.BootOnce)}})
	if err != nil {
		t.Fatal(err)
	}
	if st := now.Status(); st.State != machine.TaskCompleted || now.Config.AtBoot || len(now.Config.Changed) != 1 {
		t.Errorf("override job: %+v %+v, want Completed at once with one change", st, now.Config)
	}

	job, err := svc.ApplyConfiguration(ctx, id, machine.Configuration{
		BIOS:      map[string]any{"ProcVirtualization": "Disabled", "PxeRetryCount": 5},
		BootOrder: reversed,
	})
	if err != nil {
		t.Fatal(err)
	}
	if st := job.Status(); st.State != machine.TaskRunning || !job.Config.AtBoot {
		t.Fatalf("BIOS job before the boot: %+v %+v, want Running until a boot", st, job.Config)
	}
	m, _ = svc.Get(id)
	if m.Settings.CurrentBIOS()["ProcVirtualization"] != "Enabled" || m.Settings.BIOSPending["ProcVirtualization"] != "Disabled" {
		t.Errorf("before the boot: current %v pending %v", m.Settings.CurrentBIOS()["ProcVirtualization"], m.Settings.BIOSPending)
	}
	if err := svc.Reset(ctx, id, machine.ResetOn); err != nil {
		t.Fatal(err)
	}
	if st := job.Status(); st.State != machine.TaskCompleted {
		t.Errorf("after the boot: %+v, want Completed", st)
	}
	m, _ = svc.Get(id)
	cur := m.Settings.CurrentBIOS()
	if cur["ProcVirtualization"] != "Disabled" || cur["PxeRetryCount"] != 5 || len(m.Settings.BIOSPending) != 0 {
		t.Errorf("after the boot: BIOS %v pending %v", cur, m.Settings.BIOSPending)
	}
	if diff := cmp.Diff(reversed, m.BootOrder()); diff != "" {
		t.Errorf("boot order (-want +got):\n%s", diff)
	}

	same, err := svc.ApplyConfiguration(ctx, id, machine.Configuration{BIOS: map[string]any{"ProcVirtualization": "Disabled"}, BootOrder: reversed})
	if err != nil {
		t.Fatal(err)
	}
	if st := same.Status(); st.State != machine.TaskCompleted || len(same.Config.Changed) != 0 {
		t.Errorf("a job that changes nothing: %+v %+v", st, same.Config)
	}

	_, err = svc.ApplyConfiguration(ctx, id, machine.Configuration{
		Boot: &machine.BootPatch{Target: ptr(machine.BootPxe)},
		BIOS: map[string]any{"NoSuchAttribute": "x"},
	})
	if !errors.Is(err, machine.ErrInvalid) {
		t.Errorf("unknown attribute: %v, want ErrInvalid", err)
	}
	if m, _ = svc.Get(id); m.Settings.Boot.Target == machine.BootPxe {
		t.Errorf("a refused job set the override")
	}
}

// TestClearJobsTakesBackWhatWaits: deleting the job queue cancels a job
// that waits for a boot and takes back what it staged.
func TestClearJobsTakesBackWhatWaits(t *testing.T) {
	ctx := context.Background()
	svc, _, id := newSvc(t)
	job, err := svc.ApplyConfiguration(ctx, id, machine.Configuration{BIOS: map[string]any{"QuietBoot": true}})
	if err != nil {
		t.Fatal(err)
	}
	n, err := svc.ClearJobs(ctx, id)
	if err != nil || n != 1 {
		t.Fatalf("ClearJobs = %d, %v", n, err)
	}
	if st := job.Status(); st.State != machine.TaskCancelled {
		t.Errorf("job after the clear: %+v", st)
	}
	m, _ := svc.Get(id)
	if len(m.Settings.BIOSPending) != 0 {
		t.Errorf("pending after the clear: %v", m.Settings.BIOSPending)
	}
	if n, _ := svc.ClearJobs(ctx, id); n != 0 {
		t.Errorf("a second clear deleted %d", n)
	}
}
