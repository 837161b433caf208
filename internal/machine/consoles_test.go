package machine_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/bmlab/bmlab/internal/machine"
	"github.com/bmlab/bmlab/internal/sim"
)

// pipeConsoles is a sim backend with serial consoles: each OpenConsole is a
// new pipe whose far end the test plays the machine on; like libvirt's, a
// new open takes the console from the last holder.
type pipeConsoles struct {
	*sim.Backend
	gate chan struct{} // when set, an open waits for it
	off  bool          // opens fail as for a machine that is off

	mu    sync.Mutex
	opens int
	ends  []net.Conn // the machine's end of each stream opened
}

func (b *pipeConsoles) OpenConsole(ctx context.Context, id string) (io.ReadWriteCloser, error) {
	if b.gate != nil {
		select {
		case <-b.gate:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.opens++
	if b.off {
		return nil, fmt.Errorf("%w: the machine is off", machine.ErrConflict)
	}
	ours, theirs := net.Pipe()
	if n := len(b.ends); n > 0 {
		_ = b.ends[n-1].Close() // taken over
	}
	b.ends = append(b.ends, theirs)
	return ours, nil
}

func (b *pipeConsoles) machineEnd(t *testing.T) (net.Conn, int) {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.ends) == 0 {
		t.Fatal("no console stream was opened")
	}
	return b.ends[len(b.ends)-1], b.opens
}

func readExactly(t *testing.T, r io.Reader, want string) {
	t.Helper()
	got := make([]byte, len(want))
	done := make(chan error, 1)
	go func() { _, err := io.ReadFull(r, got); done <- err }()
	select {
	case err := <-done:
		if err != nil || string(got) != want {
			t.Fatalf("read %q (%v), want %q", got, err, want)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("no %q within 10 s", want)
	}
}

func newConsoles(t *testing.T) (*pipeConsoles, machine.ConsoleOpener, string) {
	be := &pipeConsoles{Backend: sim.New(1)}
	svc := machine.NewService(be, nil)
	c := svc.Consoles()
	if c == nil {
		t.Fatal("a backend with consoles has no shared consoles")
	}
	return be, c, be.List()[0].ID
}

// TestSharedConsoleTwoReaders: an IPMI SOL session and a web console page
// on one machine read the same output and both type into it, over one
// stream of the backend's (two would take it from each other).
func TestSharedConsoleTwoReaders(t *testing.T) {
	be, consoles, id := newConsoles(t)
	ctx := context.Background()
	sol, err := consoles.OpenConsole(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	defer sol.Close()
	page, err := consoles.OpenConsole(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	defer page.Close()
	m, opens := be.machineEnd(t)
	if opens != 1 {
		t.Fatalf("%d backend opens for two readers, want 1", opens)
	}
	go func() { _, _ = m.Write([]byte("grub> ")) }()
	readExactly(t, sol, "grub> ")
	readExactly(t, page, "grub> ")
	for _, typed := range []struct {
		who io.Writer
		s   string
	}{{sol, "ls\r"}, {page, "help\r"}} {
		go func() { _, _ = typed.who.Write([]byte(typed.s)) }()
		readExactly(t, m, typed.s)
	}
}

// TestSharedConsoleEnds: the machine stops, every reader sees the end after
// the output before it; the next open opens a new stream. The last reader
// to leave closes the stream; one leaving before it does not.
func TestSharedConsoleEnds(t *testing.T) {
	be, consoles, id := newConsoles(t)
	ctx := context.Background()
	a, _ := consoles.OpenConsole(ctx, id)
	b, _ := consoles.OpenConsole(ctx, id)
	m, _ := be.machineEnd(t)
	_, _ = m.Write([]byte("bye"))
	_ = m.Close() // the machine stopped
	for _, r := range []io.Reader{a, b} {
		readExactly(t, r, "bye")
		if n, err := r.Read(make([]byte, 8)); n != 0 || !errors.Is(err, io.EOF) {
			t.Fatalf("read after the end: %d, %v; want io.EOF", n, err)
		}
	}
	a.Close()
	b.Close()

	c, err := consoles.OpenConsole(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	d, _ := consoles.OpenConsole(ctx, id)
	m2, opens := be.machineEnd(t)
	if opens != 2 || m2 == m {
		t.Fatalf("%d opens after the end, want a second stream", opens)
	}
	c.Close()
	go func() { _, _ = m2.Write([]byte("still")) }()
	readExactly(t, d, "still") // c leaving left d's stream open
	d.Close()
	if _, err := m2.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
		t.Fatalf("the backend stream after the last reader left: %v, want closed", err)
	}
	if _, err := d.Read(make([]byte, 1)); err == nil {
		t.Fatal("a closed reader still reads")
	}
}

// TestSharedConsoleOpensOnce: readers that come while the backend's open is
// under way join it instead of opening again (which would take the stream
// from the first); when the machine is off they all get its error.
func TestSharedConsoleOpensOnce(t *testing.T) {
	be, consoles, id := newConsoles(t)
	be.gate = make(chan struct{})
	ctx := context.Background()
	type res struct {
		c   io.ReadWriteCloser
		err error
	}
	out := make(chan res, 3)
	for range 3 {
		go func() { c, err := consoles.OpenConsole(ctx, id); out <- res{c, err} }()
	}
	close(be.gate)
	for range 3 {
		r := <-out
		if r.err != nil {
			t.Fatal(r.err)
		}
		defer r.c.Close()
	}
	if _, opens := be.machineEnd(t); opens != 1 {
		t.Fatalf("%d backend opens for three readers arriving together, want 1", opens)
	}

	be2, consoles2, id2 := newConsoles(t)
	be2.off = true
	for range 2 {
		if _, err := consoles2.OpenConsole(ctx, id2); !errors.Is(err, machine.ErrConflict) {
			t.Fatalf("open while the machine is off: %v, want ErrConflict", err)
		}
	}
}

// TestSharedConsoleSlowReader: a reader that does not read keeps at most
// the last MiB; the others are not held back by it.
func TestSharedConsoleSlowReader(t *testing.T) {
	be, consoles, id := newConsoles(t)
	ctx := context.Background()
	slow, _ := consoles.OpenConsole(ctx, id)
	defer slow.Close()
	fast, _ := consoles.OpenConsole(ctx, id)
	defer fast.Close()
	m, _ := be.machineEnd(t)
	chunk := make([]byte, 64<<10)
	for i := range chunk {
		chunk[i] = 'x'
	}
	const chunks = 40 // 2.5 MiB
	go func() {
		for range chunks {
			_, _ = m.Write(chunk)
		}
		_, _ = m.Write([]byte("END"))
	}()
	var got int
	buf := make([]byte, 32<<10)
	for got < chunks*len(chunk)+3 {
		n, err := fast.Read(buf)
		if err != nil {
			t.Fatalf("fast reader after %d bytes: %v", got, err)
		}
		got += n
	}
	// The fast reader had everything, so the slow one's queue is final:
	// the last MiB, ending with the last output.
	last := make([]byte, 1<<20)
	if _, err := io.ReadFull(slow, last); err != nil || string(last[len(last)-3:]) != "END" {
		t.Fatalf("the slow reader's last MiB: %v, ends %q; want the output's end", err, last[len(last)-3:])
	}
	// Nothing more was queued: once the stream ends, the next read is
	// the end.
	_ = m.Close()
	if n, err := slow.Read(buf); n != 0 || !errors.Is(err, io.EOF) {
		t.Fatalf("the slow reader held %d bytes more than 1 MiB (%v)", n, err)
	}
}
