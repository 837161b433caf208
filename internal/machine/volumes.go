package machine

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"time"
)

// RAID volumes, as a storage controller's: a volume is made over drives the
// machine has, with a RAID level, and appears to the machine as a disk of
// its own at its next boot (the BMC's OnReset apply time). Here it is a new
// thin disk whose size follows the level (RAID0: the drives' sum, RAID1:
// the smallest), attached to the machine's persistent definition; the
// drives themselves are left as they are. Deleting a volume detaches it
// and removes its disk (at once when the machine is off, else at its next
// start).

// Volume is one RAID volume.
type Volume struct {
	ID            string
	Name          string
	RAIDType      string   // RAID0 or RAID1
	Drives        []string // Disk IDs it is made over
	CapacityBytes int64
	// Path is the disk the backend made for it ("" until it has).
	Path string
}

// RAIDTypes are the levels CreateVolume takes.
var RAIDTypes = []string{"RAID0", "RAID1"}

// maxVolumes bounds the volumes of one machine.
const maxVolumes = 8

// CreateVolume adds a volume over drives: checked against the machine's
// disks, sized by the level (capacity, when given, may ask for less). The
// volume applies OnReset, as a storage controller's configuration job: the
// task returned completes at the machine's next boot, when the machine has
// the volume (Cancelled if the volume is deleted before).
func (s *Service) CreateVolume(ctx context.Context, id string, v Volume) (Volume, *Task, error) {
	var out Volume
	_, err := s.UpdateSettings(ctx, id, func(st *Settings) error {
		m, err := s.be.Get(id)
		if err != nil {
			return err
		}
		if len(st.Volumes) >= maxVolumes {
			return fmt.Errorf("%w: %s has %d volumes, the most it may have", ErrConflict, m.Name, maxVolumes)
		}
		if !slices.Contains(RAIDTypes, v.RAIDType) {
			return invalidf("RAID type %q: this controller makes %v", v.RAIDType, RAIDTypes)
		}
		min := map[string]int{"RAID0": 1, "RAID1": 2}[v.RAIDType]
		if len(v.Drives) < min {
			return invalidf("%s needs at least %d drive(s), got %d", v.RAIDType, min, len(v.Drives))
		}
		var sum, least int64
		for i, did := range v.Drives {
			if slices.Contains(v.Drives[:i], did) {
				return invalidf("drive %s is given twice", did)
			}
			d, ok := driveOf(m, st, did)
			if !ok {
				return invalidf("%s has no drive %q", m.Name, did)
			}
			sum += d.Capacity
			if least == 0 || d.Capacity < least {
				least = d.Capacity
			}
		}
		size := sum
		if v.RAIDType == "RAID1" {
			size = least
		}
		if size <= 0 {
			return invalidf("the drives' size is unknown; a volume over them cannot be sized")
		}
		if v.CapacityBytes > size {
			return invalidf("CapacityBytes %d is more than %s over these drives gives (%d)", v.CapacityBytes, v.RAIDType, size)
		}
		if v.CapacityBytes <= 0 {
			v.CapacityBytes = size
		}
		v.ID = nextVolumeID(st.Volumes)
		if v.Name == "" {
			v.Name = "Volume " + v.ID
		}
		v.Drives = slices.Clone(v.Drives)
		v.Path = ""
		st.Volumes = append(st.Volumes, v)
		out = v
		return nil
	})
	if err != nil {
		return out, nil, err
	}
	m, err := s.be.Get(id)
	if err != nil {
		return out, nil, err
	}
	t := &Task{
		Kind: TaskVolumeCreate, MachineID: m.ID, MachineName: m.Name, Volume: out.ID, Started: time.Now(),
		done: make(chan struct{}), cancel: func() {}, state: TaskRunning, awaiting: true,
	}
	s.tasks.mu.Lock()
	s.tasks.volumes[m.ID] = append(s.tasks.volumes[m.ID], t)
	s.addTask(t)
	s.tasks.mu.Unlock()
	return out, t, nil
}

// volumesApplied ends the volume tasks of machine id as it boots with
// settings st: Completed for the volumes it has, Cancelled for those
// deleted meanwhile.
func (s *Service) volumesApplied(id string, st Settings) {
	s.tasks.mu.Lock()
	ts := s.tasks.volumes[id]
	delete(s.tasks.volumes, id)
	s.tasks.mu.Unlock()
	for _, t := range ts {
		if slices.ContainsFunc(st.Volumes, func(v Volume) bool { return v.ID == t.Volume }) {
			t.finish(TaskCompleted, nil)
		} else {
			t.finish(TaskCancelled, fmt.Errorf("volume %s was deleted before a reset made it", t.Volume))
		}
	}
}

// DeleteVolume removes a volume.
func (s *Service) DeleteVolume(ctx context.Context, id, vid string) error {
	_, err := s.UpdateSettings(ctx, id, func(st *Settings) error {
		i := slices.IndexFunc(st.Volumes, func(v Volume) bool { return v.ID == vid })
		if i < 0 {
			return fmt.Errorf("volume %q: %w", vid, ErrNotFound)
		}
		st.Volumes = slices.Delete(slices.Clone(st.Volumes), i, i+1)
		return nil
	})
	if err == nil {
		s.tasks.mu.Lock()
		var gone []*Task
		s.tasks.volumes[id] = slices.DeleteFunc(s.tasks.volumes[id], func(t *Task) bool {
			if t.Volume == vid {
				gone = append(gone, t)
				return true
			}
			return false
		})
		s.tasks.mu.Unlock()
		for _, t := range gone {
			t.finish(TaskCancelled, fmt.Errorf("volume %s was deleted before a reset made it", vid))
		}
	}
	return err
}

// driveOf finds a drive: a disk of the machine that is not a volume's.
func driveOf(m *Machine, st *Settings, did string) (Disk, bool) {
	for _, d := range m.Disks {
		if d.ID == did && d.Device == DeviceDisk && !IsVolumeDisk(st, d) {
			return d, true
		}
	}
	return Disk{}, false
}

// IsVolumeDisk reports whether a disk is one a volume made.
func IsVolumeDisk(st *Settings, d Disk) bool {
	for _, v := range st.Volumes {
		if v.Path != "" && v.Path == d.Source {
			return true
		}
	}
	return false
}

func nextVolumeID(vs []Volume) string {
	n := 0
	for _, v := range vs {
		if i, err := strconv.Atoi(v.ID); err == nil && i > n {
			n = i
		}
	}
	return strconv.Itoa(n + 1)
}
