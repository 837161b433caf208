package webui

import (
	"context"
	"net/netip"
	"sync"
	"time"

	"github.com/bmlab/bmlab/internal/admission"
	"github.com/bmlab/bmlab/internal/redfish"
)

// Slots for live streams and consoles, and keeping them to their session.
//
// A live stream or a console is long-lived, so each holds a slot: at most
// maxStreams in all, maxStreamsPerUser for one user (a stored account, the
// service user, a machine's user) and maxStreamsPerSource for one source
// address (an IPv6 one's /64). A slot is taken only once the request's
// session token is valid: a console websocket took one before its token
// came, for 10 s, and 256 tokenless handshakes shut the console for
// everyone (issue 32); one ReadOnly account's 256 live streams did the same.
//
// A stream or console holds its session to what the session is now
// (watch): it is checked again at once when any session ends or any
// account changes (redfish.Server.Changed), and when the session would
// expire; a session that ended, or whose account was deleted or disabled,
// closes it, and a role that no longer allows it (a console for an account
// lowered to ReadOnly) does too. Checking never marks the session used: an
// open page does not keep a session alive past its timeout; what the user
// does (a request, typing in the console) does.

// MaxConsoles is the most consoles (serial and graphical) open at once, in
// the slots they share with live streams.
const MaxConsoles = maxStreams

const (
	maxStreams          = 256
	maxStreamsPerUser   = 16
	maxStreamsPerSource = 32
)

type slots struct {
	mu       sync.Mutex
	total    int
	byUser   map[string]int
	bySource map[netip.Addr]int
}

// take claims a slot for user from remote; release gives it back. why says
// which bound was reached when none is free.
func (s *slots) take(user, remote string) (release func(), why string) {
	src := admission.SourceOf(remote)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.byUser == nil {
		s.byUser, s.bySource = map[string]int{}, map[netip.Addr]int{}
	}
	switch {
	case s.byUser[user] >= maxStreamsPerUser:
		return nil, "this user has as many live views and consoles open as it may; close some"
	case s.bySource[src] >= maxStreamsPerSource:
		return nil, "this address has as many live views and consoles open as it may; close some"
	case s.total >= maxStreams:
		return nil, "too many live views and consoles are open; try again later"
	}
	s.total++
	s.byUser[user]++
	s.bySource[src]++
	var once sync.Once
	return func() {
		once.Do(func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			s.total--
			if s.byUser[user]--; s.byUser[user] <= 0 {
				delete(s.byUser, user)
			}
			if s.bySource[src]--; s.bySource[src] <= 0 {
				delete(s.bySource, src)
			}
		})
	}, ""
}

// watch holds a stream to its session: it returns a channel that receives
// the caller as it is now whenever that may have changed (a session ended,
// an account changed, the session's expiry came), and is closed, with the
// stream's context cancelled, when the session is over. still decides
// whether the caller may go on; a stream that may not is ended the same
// way.
func (u *UI) watch(ctx context.Context, token string, c redfish.Caller, still func(redfish.Caller) bool) <-chan redfish.Caller {
	out := make(chan redfish.Caller, 1)
	go func() {
		defer close(out)
		expiry := time.NewTimer(time.Until(c.Expires))
		defer expiry.Stop()
		for {
			// Armed before the check: a change during the check
			// is seen at the next turn.
			sessions, accts := u.rf.Changed()
			now, ok := u.rf.SessionState(ctx, token)
			if !ok || !still(now) {
				return
			}
			if now.Role != c.Role || now.Privileges != c.Privileges {
				c = now
				select {
				case out <- now:
				default:
					// The stream has not read the last one:
					// replace it.
					select {
					case <-out:
					default:
					}
					out <- now
				}
			}
			expiry.Reset(time.Until(now.Expires)) // Go 1.23 timers: no stale tick after Reset
			select {
			case <-ctx.Done():
				return
			case <-u.done:
				return
			case <-sessions:
			case <-accts:
			case <-expiry.C:
			}
		}
	}()
	return out
}
