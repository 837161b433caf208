package machine

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"time"

	"go.uber.org/zap"
)

// WithBMCUpdateDowntime sets how long a BMC answers nothing after its
// firmware was updated, as a real one reboots (default 1 min; 0 is taken
// as the default).
func WithBMCUpdateDowntime(d time.Duration) ServiceOption {
	return func(s *Service) {
		if d > 0 {
			s.bmcUpdateDown = d
		}
	}
}

// defaultBMCFlash is how long a BMC flashes its own new firmware.
const defaultBMCFlash = 2 * time.Second

// WithBMCFlashTime sets how long a BMC flashes a checked image of its own
// firmware before it reboots (default 2 s; negative is taken as the
// default). Meanwhile it answers, and its task runs: a client reads the
// task monitor SimpleUpdate gave it, as sushy does at once, before the BMC
// goes away, as a real BMC, which takes minutes to flash, lets it.
func WithBMCFlashTime(d time.Duration) ServiceOption {
	return func(s *Service) {
		if d >= 0 {
			s.bmcFlash = d
		}
	}
}

// BMCUpdateDowntime is how long a BMC is down after a firmware update.
func (s *Service) BMCUpdateDowntime() time.Duration { return s.bmcUpdateDown }

// UpdateRequest is a firmware update (Redfish SimpleUpdate).
type UpdateRequest struct {
	// Image is the image's http(s) URI; a fragment #sha256=HEX gives the
	// checksum the image must have.
	Image string
	// Component is the component the client targeted (a firmware
	// inventory item, or the Manager for the BMC); "" targets the
	// machine and leaves the component to the image.
	Component FirmwareComponent
}

// UpdateFirmware starts a firmware update of machine id and returns its
// task. What can be checked at once is (the URI, the target, one download
// at a time per machine); the image is fetched, checked and applied in the
// background, and a failure ends the task in Exception with a
// *FirmwareError. A BIOS or NIC update then waits, as staged firmware,
// for the machine's next reset (which completes the task); a BMC update
// applies at once and takes the BMC down for BMCUpdateDowntime.
func (s *Service) UpdateFirmware(_ context.Context, id string, req UpdateRequest) (*Task, error) {
	if s.tasks.fetcher == nil {
		return nil, fmt.Errorf("%w: firmware updates need an image cache, and this service has none", ErrUnsupported)
	}
	if len(req.Image) > MaxImageURI {
		return nil, invalidf("the image URI is %d bytes long; at most %d are accepted", len(req.Image), MaxImageURI)
	}
	image, sum, err := SplitImageChecksum(req.Image)
	if err != nil {
		return nil, err
	}
	u, err := url.Parse(image)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, invalidf("the image URI %s is not an http or https URI", redact(image))
	}
	if req.Component != "" && !slices.Contains(FirmwareComponents, req.Component) {
		return nil, invalidf("this BMC does not update %s firmware", req.Component)
	}
	m, unlock, err := s.resolve(id)
	if err != nil {
		return nil, err
	}
	defer unlock()
	ctx, cancel := context.WithCancel(context.Background())
	t := &Task{
		Kind: TaskFirmwareUpdate, MachineID: m.ID, MachineName: m.Name, Image: redact(image), Component: req.Component,
		Started: time.Now(), done: make(chan struct{}), cancel: cancel, state: TaskRunning,
	}
	s.tasks.mu.Lock()
	for _, o := range s.tasks.firmware[m.ID] {
		if st := o.Status(); !st.Awaiting {
			s.tasks.mu.Unlock()
			cancel()
			return nil, fmt.Errorf("%w: %s is loading the firmware image %s (task %s); wait for it", ErrConflict, m.Name, o.Image, o.ID)
		}
	}
	s.tasks.firmware[m.ID] = append(s.tasks.firmware[m.ID], t)
	s.addTask(t)
	s.tasks.mu.Unlock()

	fr := ImageRequest{Image: image, Source: s.sourceOf(m.ID), VerifyCertificate: true, Raw: true, MaxBytes: MaxFirmwareBytes,
		InUse: s.AttachedImages, Progress: t.progress}
	go s.runUpdate(ctx, t, fr, sum)
	return t, nil
}

// runUpdate fetches and checks the image, then stages or applies it.
func (s *Service) runUpdate(ctx context.Context, t *Task, fr ImageRequest, sum string) {
	img, release, err := s.tasks.fetcher.Fetch(ctx, fr)
	if err != nil {
		s.endUpdate(t, TaskException, &FirmwareError{Kind: FirmwareTransfer, Err: err})
		return
	}
	defer release()
	if err := CheckFirmwareImage(img, sum); err != nil {
		s.endUpdate(t, TaskException, &FirmwareError{Kind: FirmwareVerify, Err: err})
		return
	}
	head, err := readHead(img.Path)
	if err != nil {
		s.endUpdate(t, TaskException, &FirmwareError{Kind: FirmwareVerify, Err: fmt.Errorf("read the image: %w", err)})
		return
	}
	c, v, err := ParseFirmwareImage(ImageName(t.Image), head)
	if err != nil {
		kind := FirmwareVerify
		if errors.Is(err, ErrUnknownComponent) {
			kind = FirmwareTarget
		}
		s.endUpdate(t, TaskException, &FirmwareError{Kind: kind, Err: err})
		return
	}
	if err := firmwareTarget(t.Component, c); err != nil {
		s.endUpdate(t, TaskException, &FirmwareError{Kind: FirmwareTarget, Err: err})
		return
	}
	if c == FirmwareBMC && s.bmcFlash > 0 {
		flash := time.NewTimer(s.bmcFlash)
		defer flash.Stop()
		select {
		case <-flash.C:
		case <-ctx.Done():
			s.endUpdate(t, TaskCancelled, ctx.Err())
			return
		}
	}
	if err := s.install(ctx, t, c, v); err != nil {
		s.endUpdate(t, TaskException, &FirmwareError{Kind: FirmwareApply, Err: err})
	}
}

// install records a checked image's version: staged for the next reset
// (BIOS, NIC), or current at once (BMC), after which the BMC reboots.
func (s *Service) install(ctx context.Context, t *Task, c FirmwareComponent, v string) error {
	unlock := s.lock(t.MachineID)
	defer unlock()
	m, err := s.be.Get(t.MachineID)
	if err != nil {
		return err
	}
	st := m.Settings.Clone()
	t.mu.Lock()
	t.Component, t.version = c, v
	t.mu.Unlock()
	if c == FirmwareBMC {
		if st.Firmware == nil {
			st.Firmware = map[FirmwareComponent]string{}
		}
		st.Firmware[c] = v
		if err := s.be.Save(ctx, m.ID, st); err != nil {
			return err
		}
		s.endUpdate(t, TaskCompleted, nil)
		s.log.Info("BMC firmware updated; the BMC reboots", zap.String("machine", m.Name), zap.String("version", v),
			zap.Duration("down", s.bmcUpdateDown))
		s.downFor(m.ID, s.bmcUpdateDown)
		return s.ResetBMC(m.ID)
	}
	if st.FirmwarePending == nil {
		st.FirmwarePending = map[FirmwareComponent]string{}
	}
	st.FirmwarePending[c] = v
	if err := s.be.Save(ctx, m.ID, st); err != nil {
		return err
	}
	// An earlier update of the same component that still waits is replaced.
	s.tasks.mu.Lock()
	var superseded []*Task
	for _, o := range s.tasks.firmware[m.ID] {
		if o != t && o.Status().Component == c {
			superseded = append(superseded, o)
		}
	}
	s.tasks.mu.Unlock()
	for _, o := range superseded {
		s.endUpdate(o, TaskCancelled, fmt.Errorf("replaced by the update of task %s before a reset applied it", t.ID))
	}
	t.mu.Lock()
	t.awaiting = true
	t.mu.Unlock()
	s.log.Info("firmware staged for the next reset", zap.String("machine", m.Name), zap.String("component", string(c)), zap.String("version", v))
	return nil
}

// firmwareApplied completes the updates that a boot installed: their
// component now runs the version they staged. Callers hold the machine's
// lock.
func (s *Service) firmwareApplied(id string, st Settings) {
	s.tasks.mu.Lock()
	var done []*Task
	for _, t := range s.tasks.firmware[id] {
		if ts := t.Status(); ts.Awaiting && st.Firmware[ts.Component] == ts.Version {
			done = append(done, t)
		}
	}
	s.tasks.mu.Unlock()
	for _, t := range done {
		s.endUpdate(t, TaskCompleted, nil)
	}
}

// endUpdate ends a firmware update once and forgets it as running.
func (s *Service) endUpdate(t *Task, state TaskState, err error) {
	if !t.finish(state, err) {
		return
	}
	t.cancel()
	s.tasks.mu.Lock()
	s.tasks.firmware[t.MachineID] = slices.DeleteFunc(s.tasks.firmware[t.MachineID], func(o *Task) bool { return o == t })
	if len(s.tasks.firmware[t.MachineID]) == 0 {
		delete(s.tasks.firmware, t.MachineID)
	}
	s.tasks.mu.Unlock()
	if state == TaskException {
		s.log.Warn("firmware update failed", zap.String("machine", t.MachineName), zap.String("image", t.Image), zap.Error(err))
	}
}
