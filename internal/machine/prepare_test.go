package machine_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/bmlab/bmlab/internal/machine"
	"github.com/bmlab/bmlab/internal/sim"
	"github.com/bmlab/bmlab/internal/testenv"
)

// isoFetcher hands out one local file for any image.
type isoFetcher struct{ path string }

func (f isoFetcher) Fetch(context.Context, machine.ImageRequest) (machine.FetchedImage, func(), error) {
	return machine.FetchedImage{Path: f.path, Size: 2048}, func() {}, nil
}

// preparing is a sim backend whose insert has a long first step without
// the machine's lock (machine.MediaPreparer), as KubeVirt's CDI import:
// it runs until its context ends or release is closed.
type preparing struct {
	*sim.Backend
	started  chan struct{}
	release  chan struct{}
	mu       sync.Mutex
	undone   int // prepared work undone (release called, not taken)
	prepared int
}

func (p *preparing) PrepareMedia(ctx context.Context, _ string, _ machine.MediaSlot, _ string) (func(), error) {
	close(p.started)
	select {
	case <-ctx.Done():
		p.mu.Lock()
		p.undone++ // a cancelled preparation cleans up after itself
		p.mu.Unlock()
		return nil, ctx.Err()
	case <-p.release:
	}
	p.mu.Lock()
	p.prepared++
	p.mu.Unlock()
	return func() {}, nil
}

func (p *preparing) counts() (prepared, undone int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.prepared, p.undone
}

// waitStarted waits until the backend's preparation began.
func (p *preparing) waitStarted(t *testing.T) {
	t.Helper()
	select {
	case <-p.started:
	case <-time.After(10 * time.Second):
		t.Fatal("the insert never called PrepareMedia")
	}
}

// insertPreparing starts an insert on a machine of a preparing backend
// and returns once the backend's preparation began.
func insertPreparing(t *testing.T) (*machine.Service, *preparing, string, *machine.Task) {
	t.Helper()
	svc, be, id := newPreparing(t)
	task, err := svc.InsertMedia(context.Background(), id, machine.SlotCD, machine.InsertRequest{Image: "http://img/boot.iso"})
	if err != nil {
		t.Fatal(err)
	}
	be.waitStarted(t)
	return svc, be, id, task
}

func newPreparing(t *testing.T) (*machine.Service, *preparing, string) {
	t.Helper()
	iso := testenv.WriteFile(t, t.TempDir(), "boot.iso", make([]byte, 2048))
	be := &preparing{Backend: sim.New(1), started: make(chan struct{}), release: make(chan struct{})}
	svc := machine.NewService(be, nil, machine.WithImageFetcher(isoFetcher{iso}))
	return svc, be, be.List()[0].ID
}

// TestPrepareMediaOutsideTheLock: while a backend prepares an insert (a
// CDI import), a boot override of that machine is taken at once; the
// insert then completes and the medium is in the drive.
func TestPrepareMediaOutsideTheLock(t *testing.T) {
	ctx := context.Background()
	svc, be, id, task := insertPreparing(t)
	done := make(chan error, 1)
	go func() {
		_, err := svc.SetBoot(ctx, id, machine.BootPatch{Target: ptr(machine.BootCd), Enabled: ptr(machine.BootOnce)})
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a boot override waited for the insert's preparation: the machine's lock is held through it")
	}
	close(be.release)
	if st := waitTask(t, task, false); st.State != machine.TaskCompleted {
		t.Fatalf("insert: %+v", st)
	}
	m, _ := svc.Get(id)
	if md := machine.MediaOf(m, machine.SlotCD); !md.Inserted {
		t.Errorf("after the insert: %+v", md)
	}
}

// TestEjectCancelsPreparation: an eject during the preparation cancels
// it and returns once the preparation undid its work; nothing is
// attached.
func TestEjectCancelsPreparation(t *testing.T) {
	ctx := context.Background()
	svc, be, id, task := insertPreparing(t)
	if err := svc.EjectMedia(ctx, id, machine.SlotCD); err != nil {
		t.Fatal(err)
	}
	if prepared, undone := be.counts(); prepared != 0 || undone != 1 {
		t.Errorf("when the eject returned: prepared %d, undone %d; want the preparation cancelled and undone", prepared, undone)
	}
	if st := task.Status(); st.State != machine.TaskCancelled {
		t.Errorf("insert task after the eject: %+v, want Cancelled", st)
	}
	m, _ := svc.Get(id)
	if md := machine.MediaOf(m, machine.SlotCD); md.Inserted {
		t.Errorf("after the eject: %+v", md)
	}
}
