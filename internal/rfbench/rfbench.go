package rfbench

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/base64"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bmlab/bmlab/internal/pace"

	"github.com/bmlab/bmlab/internal/machine"
	"github.com/bmlab/bmlab/internal/redfish"
	"github.com/bmlab/bmlab/internal/sim"
)

// childEnv marks the re-executed process that serves.
const childEnv = "RFBENCH_SERVE"

type options struct {
	url       string
	path      string
	conns     int
	duration  time.Duration
	warmup    time.Duration
	user      string
	password  string
	serverPID int
	systems   int
	attack    string
	n         int
	rate      int
	floor     int    // bytes the bare server answers with; 0: a Redfish server
	floorCopy string // a response the bare server replays byte for byte

	// The HTTP/2 attacks'.
	sources int
	streams int
	hold    time.Duration
	settle  time.Duration
	maxRSS  int64 // MB
}

// Run parses args, runs the benchmark and writes the report to out.
func Run(ctx context.Context, args []string, out io.Writer) error {
	if os.Getenv(childEnv) != "" {
		return serveChild(ctx, args)
	}
	var o options
	fs := flag.NewFlagSet("rfbench", flag.ContinueOnError)
	fs.StringVar(&o.url, "url", "", "base URL of a running service (http://127.0.0.1:8000); empty starts one over the sim backend")
	fs.StringVar(&o.path, "path", "", "resource to GET (default: the first system, /redfish/v1/Systems/<uuid>)")
	fs.IntVar(&o.conns, "c", 8, "concurrent keep-alive connections")
	fs.DurationVar(&o.duration, "d", 10*time.Second, "measured duration")
	fs.DurationVar(&o.warmup, "warmup", time.Second, "unmeasured load before measuring")
	fs.StringVar(&o.user, "user", "admin", "Basic auth user (empty: no auth)")
	fs.StringVar(&o.password, "password", "password", "Basic auth password")
	fs.IntVar(&o.serverPID, "server-pid", 0, "PID of the server, to read its CPU time from /proc (with -url)")
	fs.IntVar(&o.systems, "systems", 10, "systems of the sim backend when rfbench starts the server")
	fs.StringVar(&o.attack, "attack", "", "send -n hostile requests of one kind (padded-basic, bad-basic, bad-session, sessions, big-body, long-path, unknown-keys-login, unknown-keys-patch, long-value; half-open opens -n connections that send nothing) to -url and report the server's memory (needs -server-pid); the HTTP/2 kinds ("+strings.Join(H2Kinds(), ", ")+") open -c connections from each of -sources addresses and hold their streams for -hold, and so do the body kinds ("+strings.Join(BodyKinds(), ", ")+": HTTP/1.1, never-ending chunked bodies, aimed at a machine's own BMC)")
	fs.IntVar(&o.sources, "sources", 1, "HTTP/2 attacks and half-open: source addresses, 127.0.0.1 to 127.0.0.N (each with -c connections, half-open: -n)")
	fs.IntVar(&o.streams, "streams", 0, "HTTP/2 attacks: streams per connection (0: as many as the server allows)")
	fs.DurationVar(&o.hold, "hold", 10*time.Second, "HTTP/2 attacks: how long the streams are held")
	fs.DurationVar(&o.settle, "settle", 10*time.Second, "HTTP/2 attacks: how long the server's memory is watched after everything is closed")
	fs.Int64Var(&o.maxRSS, "max-rss", 4000, "HTTP/2 attacks: stop when the server's VmRSS passes this many MB (0: never), so that a server that grows does not take the machine with it")
	fs.IntVar(&o.n, "n", 10000, "requests to send with -attack")
	fs.IntVar(&o.rate, "rate", 0, "at most this many requests a second over all connections, for soaks (default: as fast as the connections go)")
	fs.IntVar(&o.floor, "floor-bytes", 0, "start a bare Go net/http server that answers every GET with this many bytes, and load it instead: this machine's floor for the same load")
	fs.StringVar(&o.floorCopy, "floor-copy", "", "start a bare Go net/http server that answers every GET with the response in this file (as curl -i saves it: status line, headers, blank line, body), the same status, headers and body byte for byte (net/http adds its own Date), after comparing the request's Authorization header with -user and -password's (401 when it differs); load it instead: this machine's floor for the same answer")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if o.floorCopy != "" {
		if o.floor != 0 {
			return errors.New("-floor-copy and -floor-bytes: give one")
		}
		if _, err := readFloorCopy(o.floorCopy); err != nil {
			return fmt.Errorf("-floor-copy: %w", err)
		}
		if o.url != "" || o.attack != "" {
			return errors.New("-floor-copy starts its own server: leave out -url and -attack")
		}
		if o.path == "" {
			o.path = "/floor"
		}
	}
	if o.floor < 0 || o.floor > 1<<20 {
		return errors.New("-floor-bytes must be between 0 (off) and 1048576")
	}
	if o.floor > 0 && (o.url != "" || o.attack != "") {
		return errors.New("-floor-bytes starts its own server: leave out -url and -attack")
	}
	if o.floor > 0 && o.path == "" {
		o.path = "/floor"
	}
	if o.conns < 1 {
		return errors.New("-c must be at least 1")
	}
	if o.attack != "" && o.url == "" {
		return errors.New("-attack measures a running vbmcd: give its -url and -server-pid")
	}
	if o.url == "" {
		u, pid, stop, err := startChild(o)
		if err != nil {
			return err
		}
		defer stop()
		o.url, o.serverPID = u, pid
	}
	base, err := url.Parse(o.url)
	if err != nil {
		return fmt.Errorf("-url: %w", err)
	}
	if err := loopbackOnly(base.Hostname()); err != nil {
		return err
	}
	if _, held := h2Kinds[o.attack]; held {
		res, err := H2Attack(ctx, H2Config{URL: o.url, Kind: o.attack, User: o.user, Password: o.password, ServerPID: o.serverPID,
			Sources: o.sources, Conns: o.conns, Streams: o.streams, Hold: o.hold, Settle: o.settle, MaxRSS: o.maxRSS * 1e6})
		if err != nil {
			return err
		}
		res.Report(out)
		return nil
	}
	if o.attack != "" {
		return runAttack(ctx, base, o, out)
	}
	if o.path == "" {
		p, err := firstSystem(base, o)
		if err != nil {
			return err
		}
		o.path = p
	}
	res, err := load(ctx, base, o)
	if err != nil {
		return err
	}
	report(out, o, res)
	return nil
}

func loopbackOnly(host string) error {
	if host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return nil
	}
	return fmt.Errorf("refusing to load %s: rfbench talks to loopback addresses only", host)
}

// serveChild is the server side when rfbench starts it: sim machines, the
// Redfish handler with Basic auth, plain HTTP on a loopback port it prints.
func serveChild(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("rfbench-serve", flag.ContinueOnError)
	n := fs.Int("systems", 10, "")
	user := fs.String("user", "admin", "")
	pass := fs.String("password", "password", "")
	floor := fs.Int("floor-bytes", 0, "")
	floorCopy := fs.String("floor-copy", "", "")
	if err := fs.Parse(args); err != nil {
		return err
	}
	var h http.Handler
	switch {
	case *floorCopy != "":
		fc, err := readFloorCopy(*floorCopy)
		if err != nil {
			return err
		}
		h = fc.handler(authHeaderValue(*user, *pass))
	case *floor > 0:
		h = floorHandler(*floor)
	default:
		svc := machine.NewService(sim.New(*n), nil)
		h = redfish.New(svc, nil, redfish.WithCredentials(*user, *pass)).Handler()
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	fmt.Printf("LISTEN %s\n", ln.Addr())
	hs := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		io.Copy(io.Discard, os.Stdin) // the parent closes stdin to stop us
		hs.Close()
	}()
	go func() {
		<-ctx.Done()
		hs.Close()
	}()
	if err := hs.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// floorHandler answers every request with n bytes of JSON and nothing else
// (no routing, no authentication): what net/http and the machine cost alone.
func floorHandler(n int) http.Handler {
	body := []byte(`{"x":"` + strings.Repeat("x", max(n-8, 0)) + `"}`)
	length := []string{strconv.Itoa(len(body))}
	ctype := []string{"application/json"}
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		h := w.Header()
		h["Content-Type"], h["Content-Length"] = ctype, length
		w.Write(body)
	})
}

// floorCopy is a saved response: what -floor-copy's server answers.
type floorCopy struct {
	status int
	header http.Header // canonical keys, as net/http writes them; no Date
	body   []byte
}

// readFloorCopy reads a response as curl -i saves it.
func readFloorCopy(file string) (*floorCopy, error) {
	raw, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	resp, err := http.ReadResponse(bufio.NewReader(bytes.NewReader(raw)), nil)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	if resp.ContentLength != int64(len(body)) {
		return nil, fmt.Errorf("%s: Content-Length %d, body %d bytes: the floor answers with a Content-Length", file, resp.ContentLength, len(body))
	}
	resp.Header.Del("Date")
	return &floorCopy{status: resp.StatusCode, header: resp.Header, body: body}, nil
}

// handler answers every request with the saved response, its header
// values assigned (not copied) into the response's map, after one string
// comparison of the Authorization header with auth (none when auth is
// ""): no routing, no password hashing, no metrics, no limits. What
// net/http and the machine cost for the very bytes vbmcd sends.
func (f *floorCopy) handler(auth string) http.Handler {
	unauth := []string{"Basic"}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		if a := r.Header["Authorization"]; auth != "" && (len(a) != 1 || a[0] != auth) {
			h["Www-Authenticate"] = unauth
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		for k, v := range f.header {
			h[k] = v
		}
		w.WriteHeader(f.status)
		w.Write(f.body)
	})
}

func startChild(o options) (base string, pid int, stop func(), err error) {
	self, err := os.Executable()
	if err != nil {
		return "", 0, nil, err
	}
	cmd := exec.Command(self, "-systems", strconv.Itoa(o.systems), "-user", o.user, "-password", o.password, "-floor-bytes", strconv.Itoa(o.floor), "-floor-copy", o.floorCopy)
	cmd.Env = append(os.Environ(), childEnv+"=1")
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return "", 0, nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return "", 0, nil, err
	}
	if err := cmd.Start(); err != nil {
		return "", 0, nil, err
	}
	stop = func() {
		stdin.Close()
		cmd.Wait()
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	addr, ok := strings.CutPrefix(strings.TrimSpace(line), "LISTEN ")
	if err != nil || !ok {
		stop()
		return "", 0, nil, fmt.Errorf("server child did not start: %q %v", line, err)
	}
	return "http://" + addr, cmd.Process.Pid, stop, nil
}

func authHeader(o options) string {
	if o.user == "" {
		return ""
	}
	return "Authorization: " + authHeaderValue(o.user, o.password) + "\r\n"
}

// authHeaderValue is the Authorization header's value rfbench sends; ""
// without a user.
func authHeaderValue(user, pass string) string {
	if user == "" {
		return ""
	}
	return "Basic " + basicCredentials(user, pass)
}

// writeTally prints how many times each outcome came, one a line in the
// order of their names, the name padded to width.
func writeTally(out io.Writer, width int, tally map[string]int) {
	for _, k := range slices.Sorted(maps.Keys(tally)) {
		fmt.Fprintf(out, "  %-*s %d\n", width, k, tally[k])
	}
}

// basicCredentials is what follows "Basic " in an Authorization header
// (RFC 7617 §2).
func basicCredentials(user, pass string) string {
	return base64.StdEncoding.EncodeToString([]byte(user + ":" + pass))
}

// insecureClient is an HTTPS client from src (any address when nil) that
// does not check the server's certificate: the tools aim at loopback.
func insecureClient(src net.IP, timeout time.Duration) *http.Client {
	d := &net.Dialer{Timeout: 5 * time.Second}
	if src != nil {
		d.LocalAddr = &net.TCPAddr{IP: src}
	}
	return &http.Client{Timeout: timeout, Transport: &http.Transport{DialContext: d.DialContext,
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // loopback tool
}

// tlsFrom connects to base from src over TLS, offering the one ALPN
// protocol proto, and shakes hands within 10 s; it does not check the
// server's certificate (loopback attack tool).
func tlsFrom(ctx context.Context, base *url.URL, src net.IP, proto string) (*tls.Conn, error) {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: src}, Timeout: 10 * time.Second}
	raw, err := d.DialContext(ctx, "tcp", base.Host)
	if err != nil {
		return nil, err
	}
	tc := tls.Client(raw, &tls.Config{InsecureSkipVerify: true, NextProtos: []string{proto}, ServerName: base.Hostname()}) //nolint:gosec // loopback attack tool
	hctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := tc.HandshakeContext(hctx); err != nil {
		raw.Close()
		return nil, err
	}
	return tc, nil
}

func dial(base *url.URL) (net.Conn, error) {
	host := base.Host
	if base.Port() == "" {
		host = net.JoinHostPort(base.Hostname(), map[bool]string{true: "443", false: "80"}[base.Scheme == "https"])
	}
	if base.Scheme == "https" {
		// A benchmark on loopback: the certificate is not the point.
		return tls.Dial("tcp", host, &tls.Config{InsecureSkipVerify: true}) //nolint:gosec
	}
	return net.Dial("tcp", host)
}

// firstSystem asks the collection for its first member.
func firstSystem(base *url.URL, o options) (string, error) {
	c, err := dial(base)
	if err != nil {
		return "", err
	}
	defer c.Close()
	fmt.Fprintf(c, "GET /redfish/v1/Systems HTTP/1.1\r\nHost: %s\r\n%s\r\n", base.Host, authHeader(o))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET /redfish/v1/Systems: %s: %s", resp.Status, body)
	}
	const key = `"@odata.id":"/redfish/v1/Systems/`
	i := strings.Index(string(body), key)
	if i < 0 {
		return "", errors.New("the Systems collection has no members")
	}
	rest := string(body[i+len(`"@odata.id":"`):])
	return rest[:strings.IndexByte(rest, '"')], nil
}

type result struct {
	requests  int
	errors    int
	elapsed   time.Duration
	latencies []time.Duration
	cpu       time.Duration // server CPU over the measured window; <0 unknown
	bytes     int64
}

// load runs o.conns connections for warmup+duration and measures the last
// o.duration.
func load(ctx context.Context, base *url.URL, o options) (*result, error) {
	reqBytes := []byte("GET " + o.path + " HTTP/1.1\r\nHost: " + base.Host + "\r\n" + authHeader(o) + "\r\n")
	var measuring atomic.Bool
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type connResult struct {
		lat    []time.Duration
		errs   int
		bytes  int64
		failed error
	}
	results := make([]connResult, o.conns)
	pacer := pace.New(o.rate)
	var wg sync.WaitGroup
	for i := range o.conns {
		c, err := dial(base)
		if err != nil {
			return nil, err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer c.Close()
			r := &results[i]
			r.lat = make([]time.Duration, 0, 1<<16)
			br := bufio.NewReaderSize(c, 64<<10)
			for ctx.Err() == nil {
				if !pacer.Wait(ctx) {
					return
				}
				start := time.Now()
				if _, err := c.Write(reqBytes); err != nil {
					r.failed = err
					return
				}
				status, n, err := readResponse(br)
				if err != nil {
					r.failed = err
					return
				}
				if !measuring.Load() {
					continue
				}
				r.lat = append(r.lat, time.Since(start))
				r.bytes += int64(n)
				if status != http.StatusOK {
					r.errs++
				}
			}
		}()
	}
	select {
	case <-time.After(o.warmup):
	case <-ctx.Done():
	}
	cpu0, cpuErr := serverCPU(o.serverPID)
	measuring.Store(true)
	start := time.Now()
	select {
	case <-time.After(o.duration):
	case <-ctx.Done():
	}
	measuring.Store(false)
	elapsed := time.Since(start)
	cpu1, cpuErr1 := serverCPU(o.serverPID)
	cancel()
	wg.Wait()
	res := &result{elapsed: elapsed, cpu: -1}
	if cpuErr == nil && cpuErr1 == nil {
		res.cpu = cpu1 - cpu0
	}
	for _, r := range results {
		if r.failed != nil && !errors.Is(r.failed, net.ErrClosed) {
			return nil, fmt.Errorf("connection failed: %w", r.failed)
		}
		res.latencies = append(res.latencies, r.lat...)
		res.errors += r.errs
		res.bytes += r.bytes
	}
	res.requests = len(res.latencies)
	slices.Sort(res.latencies)
	return res, nil
}

// readResponse reads one response with a Content-Length body and returns
// its status and body size.
func readResponse(br *bufio.Reader) (status, n int, err error) {
	line, err := br.ReadSlice('\n')
	if err != nil {
		return 0, 0, err
	}
	if len(line) < 12 {
		return 0, 0, fmt.Errorf("bad status line %q", line)
	}
	status, err = strconv.Atoi(string(line[9:12]))
	if err != nil {
		return 0, 0, fmt.Errorf("bad status line %q", line)
	}
	length := -1
	for {
		h, err := br.ReadSlice('\n')
		if err != nil {
			return 0, 0, err
		}
		if len(h) <= 2 {
			break
		}
		if len(h) > 16 && strings.EqualFold(string(h[:15]), "Content-Length:") {
			length, err = strconv.Atoi(strings.TrimSpace(string(h[15:])))
			if err != nil {
				return 0, 0, fmt.Errorf("bad Content-Length %q", h)
			}
		}
	}
	if length < 0 {
		if status == http.StatusNoContent || status == http.StatusNotModified {
			return status, 0, nil
		}
		return 0, 0, errors.New("response without Content-Length (chunked bodies are not supported)")
	}
	_, err = br.Discard(length)
	return status, length, err
}

// clockTick is USER_HZ, the unit of /proc/PID/stat times; 100 on Linux.
const clockTick = 100

// serverCPU reads a process's user+system CPU time from /proc/PID/stat.
func serverCPU(pid int) (time.Duration, error) {
	if pid <= 0 {
		return 0, errors.New("no server PID")
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// Fields after the parenthesised command name; utime and stime are the
	// 14th and 15th fields of the line.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, errors.New("unexpected /proc stat format")
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return 0, errors.New("unexpected /proc stat format")
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, errors.New("unexpected /proc stat format")
	}
	return time.Duration(ut+st) * time.Second / clockTick, nil
}

func pct(l []time.Duration, p float64) time.Duration {
	if len(l) == 0 {
		return 0
	}
	return l[min(len(l)-1, int(float64(len(l))*p))]
}

func report(out io.Writer, o options, r *result) {
	rps := float64(r.requests) / r.elapsed.Seconds()
	fmt.Fprintf(out, "target        %s%s\n", o.url, o.path)
	fmt.Fprintf(out, "connections   %d keep-alive, %v measured after %v warm-up\n", o.conns, o.duration, o.warmup)
	fmt.Fprintf(out, "requests      %d (%d not 200), %.0f bytes/response\n", r.requests, r.errors, float64(r.bytes)/float64(max(r.requests, 1)))
	fmt.Fprintf(out, "throughput    %.0f req/s\n", rps)
	fmt.Fprintf(out, "latency       p50 %v  p99 %v  max %v\n", pct(r.latencies, 0.50), pct(r.latencies, 0.99), pct(r.latencies, 1))
	if r.cpu >= 0 && r.requests > 0 {
		fmt.Fprintf(out, "server CPU    %v total, %.4f ms/request (pid %d, /proc)\n",
			r.cpu, r.cpu.Seconds()*1000/float64(r.requests), o.serverPID)
	} else {
		fmt.Fprintf(out, "server CPU    unknown (give -server-pid)\n")
	}
}
