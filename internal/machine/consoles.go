package machine

import (
	"context"
	"errors"
	"io"
	"sync"
)

// A machine has one serial console, and every face shows that one: IPMI
// SOL sessions and the web console's pages share one backend stream per
// machine instead of taking it from each other (libvirt gives a console to
// one holder; a second open takes it over). Each reader gets every byte of
// output from the moment it joined; what any of them types goes to the
// machine. When the backend's stream ends (the machine stopped, or a holder
// outside vbmcd such as virsh console took it), every reader sees the end,
// as with the backend's own stream, and the next open opens a new one. The
// stream is closed when its last reader leaves.

// shareQueued bounds the output one reader has not read yet; a reader that
// falls further behind loses the oldest bytes (a serial line loses them
// too).
const shareQueued = 1 << 20

// Consoles returns the machines' shared serial consoles, or nil when the
// backend's machines have none.
func (s *Service) Consoles() ConsoleOpener {
	be, ok := s.be.(ConsoleOpener)
	if !ok {
		return nil
	}
	s.consoles.once.Do(func() {
		s.consoles.be = be
		s.consoles.streams = map[string]*sharedConsole{}
	})
	return &s.consoles
}

// consoleMux implements ConsoleOpener over the backend's one.
type consoleMux struct {
	once    sync.Once
	be      ConsoleOpener
	mu      sync.Mutex
	streams map[string]*sharedConsole // the stream open (or opening) per machine
}

// sharedConsole is one machine's backend stream and its readers.
type sharedConsole struct {
	x     *consoleMux
	id    string
	ready chan struct{} // closed once the open returned (con or err set)
	con   io.ReadWriteCloser
	err   error
	wmu   sync.Mutex // one writer at a time

	mu     sync.Mutex
	shares map[*consoleShare]struct{}
	ended  bool
}

// OpenConsole joins machine id's console stream, opening it when none is
// open. Opens that come while one is under way wait for it and join it (or
// get its error: the machine is off).
func (x *consoleMux) OpenConsole(ctx context.Context, id string) (io.ReadWriteCloser, error) {
	for {
		x.mu.Lock()
		sc := x.streams[id]
		opener := sc == nil
		if opener {
			sc = &sharedConsole{x: x, id: id, ready: make(chan struct{}), shares: map[*consoleShare]struct{}{}}
			x.streams[id] = sc
		}
		x.mu.Unlock()
		if opener {
			con, err := x.be.OpenConsole(ctx, id)
			sc.mu.Lock()
			sc.con, sc.err, sc.ended = con, err, err != nil
			sc.mu.Unlock()
			if err != nil {
				x.drop(sc)
			} else {
				go sc.pump()
			}
			close(sc.ready)
		}
		select {
		case <-sc.ready:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if sc.err != nil {
			return nil, sc.err
		}
		if sh := sc.join(); sh != nil {
			return sh, nil
		}
		// It ended between its open and this join: open the next one.
		if err := ctx.Err(); err != nil {
			return nil, err
		}
	}
}

// drop forgets sc if it is still machine id's stream.
func (x *consoleMux) drop(sc *sharedConsole) {
	x.mu.Lock()
	if x.streams[sc.id] == sc {
		delete(x.streams, sc.id)
	}
	x.mu.Unlock()
}

func (sc *sharedConsole) join() *consoleShare {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	if sc.ended {
		return nil
	}
	sh := &consoleShare{sc: sc, wake: make(chan struct{}, 1)}
	sc.shares[sh] = struct{}{}
	return sh
}

// pump copies the backend stream's output to every reader until it ends.
func (sc *sharedConsole) pump() {
	buf := make([]byte, 4096)
	for {
		n, err := sc.con.Read(buf)
		if n > 0 {
			sc.mu.Lock()
			for sh := range sc.shares {
				sh.put(buf[:n])
			}
			sc.mu.Unlock()
		}
		if err != nil {
			break
		}
	}
	sc.end()
}

// end marks the stream ended, tells its readers and closes it.
func (sc *sharedConsole) end() {
	sc.x.drop(sc)
	sc.mu.Lock()
	if sc.ended {
		sc.mu.Unlock()
		return
	}
	sc.ended = true
	for sh := range sc.shares {
		sh.finish()
	}
	sc.mu.Unlock()
	_ = sc.con.Close()
}

// leave removes sh; the last reader to leave closes the stream.
func (sc *sharedConsole) leave(sh *consoleShare) {
	sc.mu.Lock()
	delete(sc.shares, sh)
	last := len(sc.shares) == 0 && !sc.ended
	sc.mu.Unlock()
	if last {
		sc.end()
	}
}

func (sc *sharedConsole) write(p []byte) (int, error) {
	sc.mu.Lock()
	ended := sc.ended
	sc.mu.Unlock()
	if ended {
		return 0, io.ErrClosedPipe
	}
	sc.wmu.Lock()
	defer sc.wmu.Unlock()
	return sc.con.Write(p)
}

// consoleShare is one reader of a shared console: what OpenConsole
// returns.
type consoleShare struct {
	sc   *sharedConsole
	wake chan struct{}

	mu     sync.Mutex
	queue  []byte
	eof    bool // the stream ended: Read returns io.EOF once queue is read
	closed bool
}

func (sh *consoleShare) put(p []byte) {
	sh.mu.Lock()
	sh.queue = append(sh.queue, p...)
	if over := len(sh.queue) - shareQueued; over > 0 {
		sh.queue = append(sh.queue[:0:0], sh.queue[over:]...)
	}
	sh.mu.Unlock()
	sh.kick()
}

func (sh *consoleShare) finish() {
	sh.mu.Lock()
	sh.eof = true
	sh.mu.Unlock()
	sh.kick()
}

func (sh *consoleShare) kick() {
	select {
	case sh.wake <- struct{}{}:
	default:
	}
}

var errShareClosed = errors.New("console closed")

// Read returns output in the order the machine printed it; io.EOF once the
// stream ended and everything before the end was read.
func (sh *consoleShare) Read(p []byte) (int, error) {
	for {
		sh.mu.Lock()
		switch {
		case sh.closed:
			sh.mu.Unlock()
			return 0, errShareClosed
		case len(sh.queue) > 0:
			n := copy(p, sh.queue)
			sh.queue = sh.queue[n:]
			if len(sh.queue) == 0 {
				sh.queue = nil
			}
			sh.mu.Unlock()
			return n, nil
		case sh.eof:
			sh.mu.Unlock()
			return 0, io.EOF
		}
		sh.mu.Unlock()
		<-sh.wake
	}
}

// Write sends input to the machine's console.
func (sh *consoleShare) Write(p []byte) (int, error) {
	sh.mu.Lock()
	closed := sh.closed
	sh.mu.Unlock()
	if closed {
		return 0, errShareClosed
	}
	return sh.sc.write(p)
}

// Close leaves the console; the machine and the other readers go on.
func (sh *consoleShare) Close() error {
	sh.mu.Lock()
	if sh.closed {
		sh.mu.Unlock()
		return nil
	}
	sh.closed = true
	sh.mu.Unlock()
	sh.kick()
	sh.sc.leave(sh)
	return nil
}
