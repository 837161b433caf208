package machine

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"
)

// Configuration jobs. A vendor's configuration profile (Dell's Server
// Configuration Profile, imported with ImportSystemConfiguration) sets many
// things at once: the BMC's own settings take effect at once (the boot
// override), the firmware's wait for the next boot (BIOS attributes, the
// boot order), as the BIOS settings of a Bios/Settings PATCH do. The job
// completes when everything it set has taken effect: at once when it set
// only the BMC's settings, else at the machine's next boot. The face that
// took the profile reads it and renders the job as its vendor does; the
// model knows no vendor.

// Configuration is what one configuration job sets. A nil field is left as
// it is.
type Configuration struct {
	// Boot is the boot override: effective at once.
	Boot *BootPatch
	// BIOS are BIOS attributes, staged for the next boot (as
	// SetBIOSPending stages them).
	BIOS map[string]any
	// BootOrder is the persistent boot order (BootOptionReferences): stored
	// at once, it applies from the next start on (SetBootOrder).
	BootOrder []string
}

// ConfigResult says what a configuration job changed.
type ConfigResult struct {
	// Changed lists what differs from before, by name ("boot override",
	// "BIOS ProcVirtualization", "boot order"); none: the machine already
	// had all of it.
	Changed []string
	// AtBoot says some of it waits for the machine's next boot.
	AtBoot bool
}

// TaskConfiguration is a configuration job: it completes at once when what
// it set is effective, else at the machine's next boot.
const TaskConfiguration TaskKind = "Configuration"

// ApplyConfiguration checks cfg whole against the machine, then sets it:
// nothing is changed when any part is refused. The task it returns is done
// when everything took effect (Completed), at once or at the machine's
// next boot; its Config says what changed.
func (s *Service) ApplyConfiguration(ctx context.Context, id string, cfg Configuration) (*Task, error) {
	if len(cfg.BIOS) > 0 {
		if err := ValidateBIOS(cfg.BIOS); err != nil {
			return nil, err
		}
	}
	m, err := s.be.Get(id)
	if err != nil {
		return nil, err
	}
	if cfg.BootOrder != nil {
		if err := checkBootOrder(m.Inventory, cfg.BootOrder); err != nil {
			return nil, err
		}
	}
	var res ConfigResult
	if cfg.Boot != nil {
		before := m.Settings.Boot
		if m, err = s.SetBoot(ctx, id, *cfg.Boot); err != nil {
			return nil, err
		}
		if m.Settings.Boot != before {
			res.Changed = append(res.Changed, "boot override")
		}
	}
	cur := m.Settings.CurrentBIOS()
	staged := map[string]any{}
	for _, k := range slices.Sorted(maps.Keys(cfg.BIOS)) {
		v := cfg.BIOS[k]
		pending, has := m.Settings.BIOSPending[k]
		if (has && fmt.Sprint(pending) == fmt.Sprint(v)) || (!has && fmt.Sprint(cur[k]) == fmt.Sprint(v)) {
			continue
		}
		staged[k] = v
		res.Changed = append(res.Changed, "BIOS "+k)
	}
	if len(staged) > 0 {
		if m, err = s.SetBIOSPending(ctx, id, staged); err != nil {
			return nil, err
		}
	}
	var order [2][]string
	if cfg.BootOrder != nil && !slices.Equal(cfg.BootOrder, m.BootOrder()) {
		order = [2][]string{slices.Clone(cfg.BootOrder), slices.Clone(m.Settings.BootOrder)}
		if m, err = s.SetBootOrder(ctx, id, cfg.BootOrder); err != nil {
			return nil, err
		}
		res.Changed = append(res.Changed, "boot order")
		res.AtBoot = true
	}
	res.AtBoot = res.AtBoot || len(staged) > 0
	t := &Task{
		Kind: TaskConfiguration, MachineID: m.ID, MachineName: m.Name, Started: time.Now(), Config: res,
		staged: staged, order: order,
		done: make(chan struct{}), cancel: func() {}, state: TaskRunning, awaiting: res.AtBoot,
	}
	s.tasks.mu.Lock()
	s.addTask(t)
	if res.AtBoot {
		s.tasks.configs[m.ID] = append(s.tasks.configs[m.ID], t)
	}
	s.tasks.mu.Unlock()
	if !res.AtBoot {
		t.finish(TaskCompleted, nil)
	}
	return t, nil
}

// configsApplied completes the configuration jobs of machine id as it
// boots: what they staged is effective now.
func (s *Service) configsApplied(id string) {
	s.tasks.mu.Lock()
	ts := s.tasks.configs[id]
	delete(s.tasks.configs, id)
	s.tasks.mu.Unlock()
	for _, t := range ts {
		t.finish(TaskCompleted, nil)
	}
}

// ReadConfiguration records a configuration job that reads the machine's
// configuration and sets nothing (an export): it is Completed at once.
func (s *Service) ReadConfiguration(id string) (*Task, error) {
	return s.ApplyConfiguration(context.Background(), id, Configuration{})
}

// ClearJobs deletes configuration jobs of machine id that wait for a boot,
// as a BMC's job queue is cleared: the ones named by task id, or all when
// none is named. Each is Cancelled, and what it set for the next boot is
// taken back where nothing changed it since (a BIOS attribute still
// pending with the job's value, the boot order still the job's). It
// returns how many jobs it deleted.
func (s *Service) ClearJobs(ctx context.Context, id string, taskIDs ...string) (int, error) {
	s.tasks.mu.Lock()
	var ts []*Task
	s.tasks.configs[id] = slices.DeleteFunc(s.tasks.configs[id], func(t *Task) bool {
		if len(taskIDs) == 0 || slices.Contains(taskIDs, t.ID) {
			ts = append(ts, t)
			return true
		}
		return false
	})
	if len(s.tasks.configs[id]) == 0 {
		delete(s.tasks.configs, id)
	}
	s.tasks.mu.Unlock()
	if len(ts) == 0 {
		return 0, nil
	}
	_, err := s.UpdateSettings(ctx, id, func(st *Settings) error {
		for _, t := range ts {
			for k, v := range t.staged {
				if p, ok := st.BIOSPending[k]; ok && fmt.Sprint(p) == fmt.Sprint(v) {
					delete(st.BIOSPending, k)
				}
			}
			if t.order[0] != nil && slices.Equal(st.BootOrder, t.order[0]) {
				st.BootOrder = slices.Clone(t.order[1])
			}
		}
		return nil
	})
	n := 0
	for _, t := range ts {
		if t.finish(TaskCancelled, fmt.Errorf("the job was deleted from the job queue before a boot applied it")) {
			n++
		}
	}
	return n, err
}
