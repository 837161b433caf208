package rfbench

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// attack is one kind of hostile request: build makes request i.
type attack struct {
	about string
	build func(base *url.URL, o options, i int) (*http.Request, error)
}

// attacks are the hostile requests of issue 15's review, each bounded by a
// limit in vbmcd; -attack NAME sends -n of one kind and reports the
// server's memory before and after.
var attacks = map[string]attack{
	"padded-basic": {"the right credentials in a Basic header padded with up to 500 spaces (a new spelling each time)",
		func(base *url.URL, o options, i int) (*http.Request, error) {
			r, err := http.NewRequest("GET", base.String()+"/redfish/v1/Systems", nil)
			if err == nil {
				r.Header.Set("Authorization", "Basic "+strings.Repeat(" ", 1+i%480)+basicCredentials(o.user, o.password))
			}
			return r, err
		}},
	"bad-basic": {"Basic logins with a new 300-byte user name and a wrong password each",
		func(base *url.URL, o options, i int) (*http.Request, error) {
			r, err := http.NewRequest("GET", base.String()+"/redfish/v1/Systems", nil)
			if err == nil {
				r.SetBasicAuth(fmt.Sprintf("%0300d", i), "wrong")
			}
			return r, err
		}},
	"bad-session": {"session logins with a 3,900-byte user name (a login body is at most 4 KiB) and a wrong password",
		func(base *url.URL, o options, i int) (*http.Request, error) {
			body := fmt.Sprintf(`{"UserName": "%d%s", "Password": "wrong"}`, i, strings.Repeat("u", 3_900))
			return jsonRequest("POST", base.String()+"/redfish/v1/SessionService/Sessions", body)
		}},
	"sessions": {"session logins with the right credentials, never logged out",
		func(base *url.URL, o options, i int) (*http.Request, error) {
			body := fmt.Sprintf(`{"UserName": %q, "Password": %q}`, o.user, o.password)
			return jsonRequest("POST", base.String()+"/redfish/v1/SessionService/Sessions", body)
		}},
	"big-body": {"PATCH bodies of 2 MiB",
		func(base *url.URL, o options, i int) (*http.Request, error) {
			return o.patchAccountService(base, `{"x": "`+strings.Repeat("x", 2<<20)+`"}`)
		}},
	// Issue 25's: a login without credentials of 80,000 unknown keys was
	// answered with a message per key (29 MB); 16 of them took vbmcd from
	// 15.7 MB to 1,055 MB.
	"unknown-keys-login": {"session logins without credentials, each a body of 80,000 unknown keys (859 KiB)",
		func(base *url.URL, o options, i int) (*http.Request, error) {
			return jsonRequest("POST", base.String()+"/redfish/v1/SessionService/Sessions", unknownKeysBody)
		}},
	"unknown-keys-patch": {"PATCHes of AccountService, logged in, each a body of 80,000 unknown keys (859 KiB)",
		func(base *url.URL, o options, i int) (*http.Request, error) {
			return o.patchAccountService(base, unknownKeysBody)
		}},
	"long-value": {"PATCHes of AccountService, logged in, with a 1,000,000-byte string where a number goes",
		func(base *url.URL, o options, i int) (*http.Request, error) {
			return o.patchAccountService(base, `{"AccountLockoutThreshold": "`+strings.Repeat("x", 1_000_000)+`"}`)
		}},
	"long-path": {"GETs of distinct 16 KiB paths",
		func(base *url.URL, o options, i int) (*http.Request, error) {
			r, err := http.NewRequest("GET", fmt.Sprintf("%s/redfish/v1/Systems/%d%s", base, i, strings.Repeat("a", 16<<10)), nil)
			if err == nil {
				r.SetBasicAuth(o.user, o.password)
			}
			return r, err
		}},
}

// unknownKeysBody is a JSON object of 80,000 unknown keys.
var unknownKeysBody = func() string {
	var b strings.Builder
	b.WriteByte('{')
	for i := range 80_000 {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"k%05d":1`, i)
	}
	b.WriteByte('}')
	return b.String()
}()

// patchAccountService is a PATCH of the AccountService with body, logged
// in as o's user.
func (o options) patchAccountService(base *url.URL, body string) (*http.Request, error) {
	r, err := jsonRequest("PATCH", base.String()+"/redfish/v1/AccountService", body)
	if err == nil {
		r.SetBasicAuth(o.user, o.password)
	}
	return r, err
}

func jsonRequest(method, u, body string) (*http.Request, error) {
	r, err := http.NewRequest(method, u, strings.NewReader(body))
	if err == nil {
		r.Header.Set("Content-Type", "application/json")
	}
	return r, err
}

// runAttack sends o.n requests of one kind over o.conns connections and
// reports the statuses and the server's resident memory before and after.
func runAttack(ctx context.Context, base *url.URL, o options, out io.Writer) error {
	if o.attack == "half-open" {
		return runHalfOpen(ctx, base, o, out)
	}
	a, ok := attacks[o.attack]
	if !ok {
		var names []string
		for k := range attacks {
			names = append(names, k)
		}
		names = append(names, "half-open")
		sort.Strings(names)
		return fmt.Errorf("-attack %q: want one of %s", o.attack, strings.Join(names, ", "))
	}
	if o.serverPID == 0 {
		return fmt.Errorf("-attack needs the server's PID (-server-pid) to read its memory")
	}
	before, err := rss(o.serverPID)
	if err != nil {
		return err
	}
	client := insecureClient(nil, 30*time.Second)
	client.Transport.(*http.Transport).MaxIdleConnsPerHost = o.conns
	defer client.CloseIdleConnections()
	var mu sync.Mutex
	statuses := map[string]int{}
	next := make(chan int)
	var wg sync.WaitGroup
	start := time.Now()
	for range o.conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				st := send(ctx, client, a, base, o, i)
				mu.Lock()
				statuses[st]++
				mu.Unlock()
			}
		}()
	}
	for i := 0; i < o.n && ctx.Err() == nil; i++ {
		next <- i
	}
	close(next)
	wg.Wait()
	elapsed := time.Since(start)
	after, err := rss(o.serverPID)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "attack %s: %s\n", o.attack, a.about)
	fmt.Fprintf(out, "requests: %d in %v over %d connections\n", o.n, elapsed.Round(time.Millisecond), o.conns)
	writeTally(out, 40, statuses)
	fmt.Fprintf(out, "server VmRSS: %.1f MB before, %.1f MB after (%+.1f MB); VmHWM %.1f MB\n",
		mb(before.rss), mb(after.rss), mb(after.rss-before.rss), mb(after.hwm))
	return nil
}

// runHalfOpen opens o.n connections from each of o.sources addresses
// (127.0.0.1, 127.0.0.2, …) and sends nothing on them, then times a GET of
// the service root from 127.0.0.1 and from an address of its own, and
// reports how many connections the server kept open and its memory (issue
// 25: 5,000 from one address added 29 MB and slowed a probe to 943 ms;
// issue 32: 128 from each of 40 were all kept).
func runHalfOpen(ctx context.Context, base *url.URL, o options, out io.Writer) error {
	if o.serverPID == 0 {
		return fmt.Errorf("-attack needs the server's PID (-server-pid) to read its memory")
	}
	before, err := rss(o.serverPID)
	if err != nil {
		return err
	}
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	sources := max(o.sources, 1)
	failed := 0
	for s := range sources {
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, byte(1+s))}, Timeout: 5 * time.Second}
		for i := 0; i < o.n && ctx.Err() == nil; i++ {
			c, err := d.DialContext(ctx, "tcp", base.Host)
			if err != nil {
				failed++
				continue
			}
			conns = append(conns, c)
		}
	}
	// A connection the server closed reads EOF at once; one it keeps
	// waits for headers (10 s).
	var open atomic.Int64
	var wg sync.WaitGroup
	for _, c := range conns {
		wg.Go(func() {
			c.SetReadDeadline(time.Now().Add(2 * time.Second))
			if _, err := c.Read(make([]byte, 1)); err != nil {
				var ne net.Error
				if errors.As(err, &ne) && ne.Timeout() {
					open.Add(1)
				}
			}
		})
	}
	wg.Wait()
	probe := func(local net.IP) string {
		c := insecureClient(local, 10*time.Second)
		defer c.CloseIdleConnections()
		start := time.Now()
		resp, err := c.Get(base.String() + "/redfish/v1/")
		took := time.Since(start).Round(10 * time.Microsecond)
		if err != nil {
			msg := err.Error()
			if j := strings.LastIndex(msg, ": "); j >= 0 {
				msg = msg[j+2:]
			}
			return fmt.Sprintf("no answer (%s) after %v", msg, took)
		}
		resp.Body.Close()
		return fmt.Sprintf("%s in %v", resp.Status, took)
	}
	other := net.IPv4(127, 0, 0, byte(min(sources+1, 254)))
	from1, from2 := probe(net.IPv4(127, 0, 0, 1)), probe(other)
	after, err := rss(o.serverPID)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "attack half-open: %d connections from each of %d addresses (127.0.0.1 on) that send nothing\n", o.n, sources)
	fmt.Fprintf(out, "connections: %d opened (%d failed to connect), %d kept open by the server\n", len(conns), failed, open.Load())
	fmt.Fprintf(out, "a GET from 127.0.0.1: %s; from %s: %s\n", from1, other, from2)
	fmt.Fprintf(out, "server VmRSS: %.1f MB before, %.1f MB after (%+.1f MB); VmHWM %.1f MB\n",
		mb(before.rss), mb(after.rss), mb(after.rss-before.rss), mb(after.hwm))
	return nil
}

// send makes and sends request i; its outcome is a status line or the
// error's kind.
func send(ctx context.Context, c *http.Client, a attack, base *url.URL, o options, i int) string {
	r, err := a.build(base, o, i)
	if err != nil {
		return "client: " + err.Error()
	}
	resp, err := c.Do(r.WithContext(ctx))
	if err != nil {
		msg := err.Error()
		if j := strings.LastIndex(msg, ": "); j >= 0 {
			msg = msg[j+2:]
		}
		return "no response: " + msg
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if id := messageID(body); id != "" {
		return resp.Status + " " + id
	}
	return resp.Status
}

// messageID is the last part of the first MessageId in an error body.
func messageID(body []byte) string {
	const key = `"MessageId":"`
	i := bytes.Index(body, []byte(key))
	if i < 0 {
		return ""
	}
	rest := body[i+len(key):]
	j := bytes.IndexByte(rest, '"')
	if j < 0 {
		return ""
	}
	id := string(rest[:j])
	return id[strings.LastIndexByte(id, '.')+1:]
}

type memory struct{ rss, hwm int64 }

// rss reads a process's resident and peak resident memory.
func rss(pid int) (memory, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return memory{}, fmt.Errorf("server memory: %w", err)
	}
	defer f.Close()
	var m memory
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, _ := strings.Cut(sc.Text(), ":")
		fields := strings.Fields(v)
		if len(fields) == 0 {
			continue
		}
		n, _ := strconv.ParseInt(fields[0], 10, 64)
		switch k {
		case "VmRSS":
			m.rss = n << 10
		case "VmHWM":
			m.hwm = n << 10
		}
	}
	return m, sc.Err()
}

func mb(n int64) float64 { return float64(n) / 1e6 }
