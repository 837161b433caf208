package machine

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"
)

// ServiceOption configures a Service.
type ServiceOption func(*Service)

// WithPowerObserver has fn told of every power action (Reset): its type,
// its outcome and how long it took.
func WithPowerObserver(fn func(rt ResetType, err error, took time.Duration)) ServiceOption {
	return func(s *Service) { s.observePower = fn }
}

// WithImageFetcher lets the service insert virtual media; without one every
// insert is refused as unsupported.
func WithImageFetcher(f ImageFetcher) ServiceOption {
	return func(s *Service) { s.tasks.fetcher = f }
}

// WithMediaSource has the machines' BMCs fetch virtual media and firmware
// images from an address of their own: addr returns a machine's (invalid:
// none, the fetcher's default), as vbmcd's per-address BMCs do
// (--bmc-addresses).
func WithMediaSource(addr func(machineID string) netip.Addr) ServiceOption {
	return func(s *Service) { s.tasks.source = addr }
}

// sourceOf is the address machine id's BMC fetches images from.
func (s *Service) sourceOf(id string) netip.Addr {
	if s.tasks.source == nil {
		return netip.Addr{}
	}
	return s.tasks.source(id)
}

// WithMediaWait bounds how long a power-on waits for virtual media that is
// still loading before it fails with ErrConflict (default 2 min).
func WithMediaWait(d time.Duration) ServiceOption {
	return func(s *Service) {
		if d > 0 {
			s.tasks.wait = d
		}
	}
}

// maxFinishedTasks is how many finished tasks the service remembers.
const maxFinishedTasks = 64

// taskTable holds the service's tasks (virtual media inserts, firmware
// updates) and the image fetcher both use.
type taskTable struct {
	fetcher ImageFetcher
	wait    time.Duration
	source  func(machineID string) netip.Addr // WithMediaSource

	mu       sync.Mutex
	byID     map[string]*Task
	order    []string           // task ids, oldest first
	active   map[string]*Task   // running insert per member (machine/slot)
	last     map[string]*Task   // last failed insert per member, until the next insert or eject
	firmware map[string][]*Task // running firmware updates per machine
	volumes  map[string][]*Task // volumes waiting for a reset, per machine
	configs  map[string][]*Task // configuration jobs waiting for a boot, per machine
}

func memberKey(id string, slot MediaSlot) string { return id + "/" + string(slot) }

// TaskState is a Redfish TaskState.
type TaskState string

// Task states.
const (
	TaskRunning   TaskState = "Running"
	TaskCompleted TaskState = "Completed"
	TaskException TaskState = "Exception"
	TaskCancelled TaskState = "Cancelled"
)

// TaskKind says what a task does.
type TaskKind string

// Task kinds.
const (
	TaskMediaInsert    TaskKind = "MediaInsert"
	TaskFirmwareUpdate TaskKind = "FirmwareUpdate"
	// TaskVolumeCreate is a RAID volume made OnReset: it completes at the
	// machine's next boot, when the machine has the volume.
	TaskVolumeCreate TaskKind = "VolumeCreate"
)

// Task is work a BMC does in the background: an insert of virtual media
// that loads, or a firmware update (SimpleUpdate).
type Task struct {
	ID          string
	Kind        TaskKind
	MachineID   string
	MachineName string
	Slot        MediaSlot // a media insert's member
	Image       string    // the URI, without credentials
	Started     time.Time
	// Component is what a firmware update targets; "" until the image
	// says (a system target leaves it to the image).
	Component FirmwareComponent
	// Volume is the ID of the volume a TaskVolumeCreate makes.
	Volume string
	// Config says what a TaskConfiguration changed.
	Config ConfigResult
	// staged and order are what a TaskConfiguration staged for the next
	// boot (BIOS attributes) and stored (the boot order, with the one it
	// replaced), so that deleting the job can take them back.
	staged map[string]any
	order  [2][]string

	done   chan struct{}
	cancel context.CancelFunc
	// exited is closed when a media insert's goroutine has returned, its
	// work undone if it did not complete (nil for other tasks).
	exited chan struct{}

	mu       sync.Mutex
	state    TaskState
	got      int64
	total    int64
	err      error
	ended    time.Time
	version  string // a firmware update's version, once the image says
	awaiting bool   // a firmware update is staged and waits for a reset
}

// TaskStatus is a snapshot of a task.
type TaskStatus struct {
	State   TaskState
	Percent int // 0..100
	Err     error
	Ended   time.Time // zero while running
	// Component and Version are a firmware update's, once the image is
	// checked ("" before).
	Component FirmwareComponent
	Version   string
	// Awaiting says a firmware update is staged and applies at the
	// machine's next reset.
	Awaiting bool
}

// Status returns the task's current state.
func (t *Task) Status() TaskStatus {
	t.mu.Lock()
	defer t.mu.Unlock()
	st := TaskStatus{State: t.state, Err: t.err, Ended: t.ended, Component: t.Component, Version: t.version, Awaiting: t.awaiting}
	switch {
	case t.state == TaskCompleted:
		st.Percent = 100
	case t.awaiting:
		st.Percent = 90 // the image is in; the reset that applies it is the rest
	case t.total > 0:
		// Loading is the work; attaching takes a moment more, so a running
		// task never says 100.
		st.Percent = int(min(99, t.got*100/t.total))
	}
	return st
}

// Done is closed when the task has finished.
func (t *Task) Done() <-chan struct{} { return t.done }

func (t *Task) progress(got, total int64) {
	t.mu.Lock()
	t.got, t.total = got, total
	t.mu.Unlock()
}

// finish ends the task once; it reports whether this call ended it.
func (t *Task) finish(state TaskState, err error) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.state != TaskRunning {
		return false
	}
	t.state, t.err, t.ended = state, err, time.Now()
	close(t.done)
	return true
}

func (t *Task) running() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.state == TaskRunning
}

// addTask gives t an id and remembers it; callers hold s.tasks.mu. The id
// is random: a count would tell a machine's BMC how many tasks the others'
// ran (issue 46), for the tasks of every machine are in one table.
func (s *Service) addTask(t *Task) {
	for t.ID = randomID(); s.tasks.byID[t.ID] != nil; t.ID = randomID() {
	}
	s.tasks.byID[t.ID] = t
	s.tasks.order = append(s.tasks.order, t.ID)
	s.pruneTasks()
}

// Tasks returns the remembered tasks, oldest first.
func (s *Service) Tasks() []*Task {
	s.tasks.mu.Lock()
	defer s.tasks.mu.Unlock()
	out := make([]*Task, 0, len(s.tasks.order))
	for _, id := range s.tasks.order {
		out = append(out, s.tasks.byID[id])
	}
	return out
}

// Task returns one task by id.
func (s *Service) Task(id string) (*Task, error) {
	s.tasks.mu.Lock()
	defer s.tasks.mu.Unlock()
	t, ok := s.tasks.byID[id]
	if !ok {
		return nil, fmt.Errorf("%w: no task %q", ErrNotFound, id)
	}
	return t, nil
}

// Media returns the state of every virtual media member of a machine.
func (s *Service) Media(id string) (*Machine, []Media, error) {
	m, err := s.be.Get(id)
	if err != nil {
		return nil, nil, err
	}
	out := make([]Media, 0, len(MediaSlots))
	for _, slot := range MediaSlots {
		out = append(out, s.mediaOf(m, slot))
	}
	return m, out, nil
}

// mediaOf is MediaOf with the member's task: a running insert shows as
// inserted (it cannot be inserted twice; eject cancels it).
func (s *Service) mediaOf(m *Machine, slot MediaSlot) Media {
	md := MediaOf(m, slot)
	s.tasks.mu.Lock()
	t := s.tasks.active[memberKey(m.ID, slot)]
	if t == nil {
		t = s.tasks.last[memberKey(m.ID, slot)]
	}
	s.tasks.mu.Unlock()
	md.Task = t
	if t != nil && t.running() && !md.Inserted {
		md.Inserted = true
		md.Image = t.Image
	}
	return md
}

// AttachedImages lists the files that machines' media drives hold.
func (s *Service) AttachedImages() []string {
	var out []string
	for _, m := range s.be.List() {
		for _, d := range m.Disks {
			if d.Source != "" && (d.Device == DeviceCDROM || d.Device == DeviceFloppy || d.Bus == "usb") {
				out = append(out, d.Source)
			}
		}
	}
	return out
}

// checkInsert validates an insert request.
func checkInsert(req InsertRequest) (scheme string, err error) {
	if req.Image == "" {
		return "", invalidf("Image is required")
	}
	if req.Inserted != nil && !*req.Inserted {
		return "", fmt.Errorf("%w: Inserted false (configure without inserting) is not supported; insert with Inserted true", ErrUnsupported)
	}
	if req.WriteProtected != nil && !*req.WriteProtected {
		return "", fmt.Errorf("%w: writable media is not supported; images are shared read-only", ErrUnsupported)
	}
	switch {
	case len(req.Image) > MaxImageURI:
		return "", invalidf("Image is %d bytes long; at most %d are accepted", len(req.Image), MaxImageURI)
	case len(req.UserName) > MaxMediaCredential:
		return "", invalidf("UserName is %d bytes long; at most %d are accepted", len(req.UserName), MaxMediaCredential)
	case len(req.Password) > MaxMediaCredential:
		return "", invalidf("Password is %d bytes long; at most %d are accepted", len(req.Password), MaxMediaCredential)
	}
	if req.TransferMethod != "" && !slices.Contains(TransferMethods, req.TransferMethod) {
		return "", invalidf("TransferMethod %q is not one of %v", req.TransferMethod, TransferMethods)
	}
	scheme = "OEM"
	if u, perr := url.Parse(req.Image); perr == nil && u.Scheme != "" && u.Scheme != "file" {
		scheme = strings.ToUpper(u.Scheme)
	}
	if req.TransferProtocol != "" && !strings.EqualFold(req.TransferProtocol, scheme) {
		return "", invalidf("TransferProtocolType %s does not match the image URI %s", req.TransferProtocol, redact(req.Image))
	}
	return scheme, nil
}

// Bounds of what a client gives with virtual media: every one is kept with
// the machine (in libvirt, the domain's metadata) or sent on each fetch.
const (
	MaxImageURI        = 2048     // bytes of an image URI
	MaxMediaCredential = 256      // bytes of an image server's user name or password
	MaxCertificates    = 8        // certificates trusted per member
	MaxCertificatePEM  = 16 << 10 // bytes of one PEM certificate
)

// redact drops credentials (user:password@) from a URI, for messages and
// for what is stored and shown.
func redact(image string) string {
	u, err := url.Parse(image)
	if err != nil || u.User == nil {
		return image
	}
	u.User = nil
	return u.String()
}

// InsertMedia starts inserting an image into a member and returns the task
// that loads it. The image is attached only once it is complete and checked;
// until then the member shows as inserted and power-on waits for it (see
// WithMediaWait). A member that holds media, or is loading some, refuses
// with ErrConflict: eject first, as on real BMCs.
func (s *Service) InsertMedia(_ context.Context, id string, slot MediaSlot, req InsertRequest) (*Task, error) {
	if s.tasks.fetcher == nil {
		return nil, fmt.Errorf("%w: virtual media needs an image cache, and this service has none", ErrUnsupported)
	}
	scheme, err := checkInsert(req)
	if err != nil {
		return nil, err
	}
	m, unlock, err := s.resolve(id)
	if err != nil {
		return nil, err
	}
	defer unlock()
	if err := mediaTarget(m, slot); err != nil {
		return nil, err
	}
	if mc, ok := s.be.(MediaChecker); ok {
		if err := mc.MediaSupported(slot); err != nil {
			return nil, err
		}
	}
	md := s.mediaOf(m, slot)
	if md.Inserted {
		what := "holds " + redact(md.Image)
		if md.Task != nil && md.Task.running() {
			what = "is loading " + redact(md.Image)
		}
		return nil, fmt.Errorf("%w: virtual media %s of %s %s; eject it first", ErrConflict, slot, m.Name, what)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t := &Task{
		Kind: TaskMediaInsert, MachineID: m.ID, MachineName: m.Name, Slot: slot, Image: redact(req.Image),
		Started: time.Now(), done: make(chan struct{}), cancel: cancel, state: TaskRunning, exited: make(chan struct{}),
	}
	s.tasks.mu.Lock()
	s.tasks.active[memberKey(m.ID, slot)] = t
	delete(s.tasks.last, memberKey(m.ID, slot))
	s.addTask(t)
	s.tasks.mu.Unlock()

	fr := ImageRequest{
		Machine: m.ID, Source: s.sourceOf(m.ID), Image: req.Image, UserName: req.UserName, Password: req.Password,
		VerifyCertificate: md.VerifyCertificate, ISO: slot == SlotCD,
		InUse: s.AttachedImages, Progress: t.progress,
	}
	for _, c := range md.Certificates {
		fr.Certificates = append(fr.Certificates, c.PEM)
	}
	// What is recorded (and shown by GET VirtualMedia) never holds the
	// URI's password; the fetcher has had the URI as given.
	rec := MediaSettings{Image: redact(req.Image), UserName: req.UserName, TransferProtocol: scheme}
	go s.runInsert(ctx, t, fr, rec)
	return t, nil
}

// pruneTasks forgets the oldest finished tasks; callers hold s.tasks.mu.
func (s *Service) pruneTasks() {
	finished := 0
	for _, id := range s.tasks.order {
		if !s.tasks.byID[id].running() {
			finished++
		}
	}
	for i := 0; finished > maxFinishedTasks && i < len(s.tasks.order); {
		id := s.tasks.order[i]
		if t := s.tasks.byID[id]; !t.running() {
			delete(s.tasks.byID, id)
			s.tasks.order = slices.Delete(s.tasks.order, i, i+1)
			finished--
			continue
		}
		i++
	}
}

func (s *Service) endTask(t *Task, state TaskState, err error) {
	if !t.finish(state, err) {
		return
	}
	t.cancel()
	key := memberKey(t.MachineID, t.Slot)
	s.tasks.mu.Lock()
	if s.tasks.active[key] == t {
		delete(s.tasks.active, key)
		if state == TaskException {
			s.tasks.last[key] = t
		}
	}
	s.tasks.mu.Unlock()
	if err != nil && state == TaskException {
		s.log.Warn("virtual media insert failed", zap.String("machine", t.MachineName),
			zap.String("slot", string(t.Slot)), zap.String("image", t.Image), zap.Error(err))
	}
}

// MediaChecker is a Backend that takes virtual media in some members
// only, or only when configured to: MediaSupported says why a member takes
// none, and the insert is refused before the image is fetched.
type MediaChecker interface {
	MediaSupported(slot MediaSlot) error
}

// MediaPreparer is a Backend whose insert has a long first step that
// needs no machine lock (KubeVirt: CDI imports the image into a
// DataVolume). The Service calls PrepareMedia with the insert's context,
// which an eject cancels, before it takes the machine's lock, so that the
// machine's other actions (a boot override, power, an eject) answer while
// it runs; then SetMedia with the same file under the lock. release undoes
// what SetMedia did not take; it is called after SetMedia, or instead of
// it when the insert ends otherwise.
type MediaPreparer interface {
	PrepareMedia(ctx context.Context, id string, slot MediaSlot, src string) (release func(), err error)
}

// runInsert loads the image and attaches it, unless the insert was
// cancelled meanwhile. Nothing is attached unless the whole image is there.
func (s *Service) runInsert(ctx context.Context, t *Task, fr ImageRequest, rec MediaSettings) {
	defer close(t.exited)
	cancelled := func() { s.endTask(t, TaskCancelled, fmt.Errorf("ejected while loading")) }
	// failed ends the task on err: cancelled when the insert was.
	failed := func(err error) {
		if ctx.Err() != nil {
			cancelled()
			return
		}
		s.endTask(t, TaskException, err)
	}
	img, release, err := s.tasks.fetcher.Fetch(ctx, fr)
	if err != nil {
		failed(err)
		return
	}
	defer release()
	if mp, ok := s.be.(MediaPreparer); ok {
		undo, err := mp.PrepareMedia(ctx, t.MachineID, t.Slot, img.Path)
		if err != nil {
			failed(err)
			return
		}
		defer undo()
	}
	if !s.holdStuckMedia(ctx, t.MachineID, t.MachineName) {
		cancelled()
		return
	}
	unlock := s.lock(t.MachineID)
	defer unlock()
	if !t.running() {
		return // ejected meanwhile
	}
	err = s.attach(ctx, t, img.Path, rec)
	if err != nil {
		s.endTask(t, TaskException, err)
		return
	}
	s.endTask(t, TaskCompleted, nil)
}

// attach puts a loaded image into the drive and records where it came from.
// Callers hold the machine's lock.
func (s *Service) attach(ctx context.Context, t *Task, path string, rec MediaSettings) error {
	m, err := s.be.Get(t.MachineID)
	if err != nil {
		return err
	}
	if md := MediaOf(m, t.Slot); md.Inserted {
		return fmt.Errorf("%w: virtual media %s of %s was filled by someone else meanwhile (%s)", ErrConflict, t.Slot, m.Name, md.Image)
	}
	recorded, err := s.recordAndAttach(ctx, m, t.Slot, withMedia(m.Settings, t.Slot, rec, path), path)
	switch {
	case !recorded && err != nil:
		return fmt.Errorf("record media of %s: %w", m.Name, err)
	case err != nil:
		return fmt.Errorf("attach %s to %s of %s: %w", path, t.Slot, m.Name, err)
	}
	return nil
}

// withMedia returns a copy of st whose member slot records rec and the
// local file path; a zero rec and "" clear the record.
func withMedia(st Settings, slot MediaSlot, rec MediaSettings, path string) Settings {
	st = st.Clone()
	ms := settingsFor(&st, slot)
	ms.Image, ms.Path, ms.UserName, ms.TransferProtocol, ms.HTTPBoot = rec.Image, path, rec.UserName, rec.TransferProtocol, rec.HTTPBoot
	return st
}

// recordAndAttach saves st, which records where the image for slot came
// from, then puts path into the drive. The record goes first: a reader in
// between sees an empty drive with an insert under way (the URL), never the
// cache's file as if an operator had put it there. A failed attach puts
// m's record back, so nothing is half recorded. recorded says whether the
// error (if any) came after the record was saved.
func (s *Service) recordAndAttach(ctx context.Context, m *Machine, slot MediaSlot, st Settings, path string) (recorded bool, err error) {
	if err := s.be.Save(ctx, m.ID, st); err != nil {
		return false, err
	}
	if err := s.be.SetMedia(ctx, m.ID, slot, path); err != nil {
		if uerr := s.be.Save(ctx, m.ID, m.Settings); uerr != nil {
			s.log.Error("undoing a media record failed", zap.String("machine", m.Name), zap.Error(uerr))
		}
		return true, err
	}
	return true, nil
}

// settingsFor returns the member's entry in st, adding it when missing.
func settingsFor(st *Settings, slot MediaSlot) *MediaSettings {
	for i := range st.Media {
		if st.Media[i].Slot == slot {
			return &st.Media[i]
		}
	}
	st.Media = append(st.Media, MediaSettings{Slot: slot, VerifyCertificate: true})
	return &st.Media[len(st.Media)-1]
}

// ejectWait bounds how long an eject waits for the insert it cancelled to
// undo its work (KubeVirt: delete the DataVolume CDI was importing into).
const ejectWait = 30 * time.Second

// EjectMedia empties a member: an insert in progress is cancelled (and
// EjectMedia returns once it has undone its work, bounded by ejectWait),
// an inserted medium is taken out (live when the machine runs). Ejecting
// an empty member succeeds.
func (s *Service) EjectMedia(ctx context.Context, id string, slot MediaSlot) error {
	t, err := s.eject(ctx, id, slot)
	if t != nil && t.exited != nil {
		// Outside the machine's lock: an insert waiting for it sees the
		// cancel once it has it, and returns.
		timer := time.NewTimer(ejectWait)
		defer timer.Stop()
		select {
		case <-t.exited:
		case <-timer.C:
			s.log.Warn("a cancelled virtual media insert did not end in time", zap.String("machine", t.MachineName),
				zap.String("slot", string(slot)), zap.Duration("waited", ejectWait))
		case <-ctx.Done():
		}
	}
	return err
}

// eject is EjectMedia's work under the machine's lock; it returns the
// insert it cancelled, if any.
func (s *Service) eject(ctx context.Context, id string, slot MediaSlot) (*Task, error) {
	m, unlock, err := s.resolve(id)
	if err != nil {
		return nil, err
	}
	defer unlock()
	if slot != SlotCD && slot != SlotRemovable {
		return nil, fmt.Errorf("%w: no virtual media %q", ErrNotFound, slot)
	}
	key := memberKey(m.ID, slot)
	s.tasks.mu.Lock()
	t := s.tasks.active[key]
	delete(s.tasks.last, key)
	s.tasks.mu.Unlock()
	if t != nil {
		s.endTask(t, TaskCancelled, fmt.Errorf("ejected while loading"))
	}
	md := MediaOf(m, slot)
	if md.Inserted {
		if err := s.be.SetMedia(ctx, m.ID, slot, ""); err != nil {
			return t, err
		}
	}
	if md.Image == "" && md.Path == "" {
		return t, nil
	}
	return t, s.be.Save(ctx, m.ID, withMedia(m.Settings, slot, MediaSettings{}, ""))
}

// MediaPatch changes a member's trust settings; nil fields stay.
type MediaPatch struct {
	VerifyCertificate *bool
	AddCertificate    *string // PEM
	RemoveCertificate *string // certificate id
}

// SetMediaSettings changes a member's VerifyCertificate and certificates.
// It returns the id of an added certificate.
func (s *Service) SetMediaSettings(ctx context.Context, id string, slot MediaSlot, p MediaPatch) (string, error) {
	if slot != SlotCD && slot != SlotRemovable {
		return "", fmt.Errorf("%w: no virtual media %q", ErrNotFound, slot)
	}
	m, unlock, err := s.resolve(id)
	if err != nil {
		return "", err
	}
	defer unlock()
	st := m.Settings.Clone()
	ms := settingsFor(&st, slot)
	added := ""
	if p.VerifyCertificate != nil {
		ms.VerifyCertificate = *p.VerifyCertificate
	}
	if p.AddCertificate != nil {
		if len(*p.AddCertificate) > MaxCertificatePEM {
			return "", invalidf("the certificate is %d bytes long; at most %d are accepted", len(*p.AddCertificate), MaxCertificatePEM)
		}
		if len(ms.Certificates) >= MaxCertificates {
			return "", invalidf("virtual media %s of %s trusts %d certificates already, the most it may; delete one first", slot, m.Name, len(ms.Certificates))
		}
		n := 1
		for _, c := range ms.Certificates {
			if v, err := strconv.Atoi(c.ID); err == nil && v >= n {
				n = v + 1
			}
		}
		added = strconv.Itoa(n)
		ms.Certificates = append(ms.Certificates, Certificate{ID: added, PEM: *p.AddCertificate})
	}
	if p.RemoveCertificate != nil {
		i := slices.IndexFunc(ms.Certificates, func(c Certificate) bool { return c.ID == *p.RemoveCertificate })
		if i < 0 {
			return "", fmt.Errorf("%w: no certificate %q", ErrNotFound, *p.RemoveCertificate)
		}
		ms.Certificates = slices.Delete(ms.Certificates, i, i+1)
	}
	return added, s.be.Save(ctx, m.ID, st)
}

// pendingMedia returns a running insert into one of the machine's members.
// A firmware task never counts: a power-on does not wait on it, as a real
// BMC's does not; an image staged after the boot began applies at the next
// reset (a task that is staged never ends before that reset, so a wait on
// it held the start for the whole --media-wait and then refused it).
func (s *Service) pendingMedia(id string) *Task {
	s.tasks.mu.Lock()
	defer s.tasks.mu.Unlock()
	for _, slot := range MediaSlots {
		if t := s.tasks.active[memberKey(id, slot)]; t != nil {
			return t
		}
	}
	return nil
}

// ErrMediaLoading marks a power-on refused because media is still loading.
var ErrMediaLoading = errors.New("virtual media still loading")

// waitMedia waits, within the service's bound, until no insert into the
// machine is running.
func (s *Service) waitMedia(ctx context.Context, id string) error {
	timer := time.NewTimer(s.tasks.wait)
	defer timer.Stop()
	for {
		t := s.pendingMedia(id)
		if t == nil {
			return nil
		}
		select {
		case <-t.Done():
		case <-ctx.Done():
			return ctx.Err()
		case <-timer.C:
			return loadingError(t, s.tasks.wait)
		}
	}
}

func loadingError(t *Task, waited time.Duration) error {
	what := string(t.Slot)
	return fmt.Errorf("%w: %w: %s of %s is still loading %s (%d%% after %s, task %s); power on once the task completes",
		ErrConflict, ErrMediaLoading, what, t.MachineName, t.Image, t.Status().Percent, waited.Round(time.Second), t.ID)
}

// randomID is a task's id: 8 random bytes in hex.
func randomID() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return hex.EncodeToString(b)
}
