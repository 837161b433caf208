package rfbench

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// The body attacks of issue 46: HTTP/1.1 requests whose chunked body
// comes in 64 KiB chunks up to about 1 MiB and whose last chunk never
// does, held open, from one or more source addresses; when the server
// closes a connection another is opened in its place. Aimed at a machine's
// own BMC of a vendor personality (vbmcd --bmc-addresses, --personality
// ilo6), whose vendor-id mapper read every body whole before the memory
// budget saw it: 16 sources × 16 such logins took vbmcd from 26 to 667 MB.
// They run through H2Attack's sampling, probes and settling.

// chunk is what a body attack sends at a time.
const chunk = 64 << 10

func init() {
	h2Kinds["bmc-chunked-login"] = h2Kind{
		about:   "session logins without credentials, HTTP/1.1, a chunked body of about 1 MiB whose last chunk never comes, one per connection, another connection when the server closes one",
		method:  "POST",
		path:    func(*h2Target) string { return "/redfish/v1/SessionService/Sessions" },
		chunked: 1 << 20,
		prefix:  `{"UserName":"`,
	}
	h2Kinds["bmc-chunked-patch"] = h2Kind{
		about:   "PATCHes of the caller's own account (a ReadOnly account the attack makes at that BMC), HTTP/1.1, a chunked body of about 1 MiB whose last chunk never comes, one per connection, another when the server closes one",
		auth:    true,
		method:  "PATCH",
		path:    func(t *h2Target) string { return t.account },
		chunked: 1 << 20,
		prefix:  `{"Password":"`,
	}
}

// h1Request is one held request of a body attack: a connection from src,
// the headers, then the body's chunks; it returns when the server closes
// the connection or ctx ends. conns counts the connections made; ready is
// called once the TLS handshake is over (or failed).
func h1Request(ctx context.Context, kind h2Kind, t *h2Target, src net.IP, conns *atomic.Int64, count func(string), ready func()) error {
	defer ready()
	tc, err := tlsFrom(ctx, t.base, src, "http/1.1")
	ready()
	if err != nil {
		return err
	}
	defer tc.Close()
	stop := context.AfterFunc(ctx, func() { tc.Close() })
	defer stop()
	conns.Add(1)
	var h strings.Builder
	fmt.Fprintf(&h, "%s %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nOData-Version: 4.0\r\nTransfer-Encoding: chunked\r\n",
		kind.method, kind.path(t), t.base.Host)
	if kind.auth {
		fmt.Fprintf(&h, "Authorization: Basic %s\r\n", basicCredentials(t.user, t.pass))
	}
	h.WriteString("\r\n")
	// The answer, whenever it comes: the server's refusal, or its close.
	answered := make(chan struct{})
	go func() {
		defer close(answered)
		resp, err := http.ReadResponse(bufio.NewReader(tc), nil)
		if err != nil {
			if ctx.Err() == nil {
				count("connection closed by the server: " + short(err))
			}
			return
		}
		count("answered " + resp.Status[:3])
		resp.Body.Close()
	}()
	if _, err := tc.Write([]byte(h.String())); err != nil {
		return err
	}
	body := []byte(kind.prefix + strings.Repeat("a", chunk-len(kind.prefix)))
	for sent := 0; sent < kind.chunked; sent += len(body) {
		if _, err := fmt.Fprintf(tc, "%x\r\n%s\r\n", len(body), body); err != nil {
			break
		}
		body = []byte(strings.Repeat("a", chunk))
	}
	select { // the last chunk never comes
	case <-answered:
	case <-ctx.Done():
	}
	return nil
}

// h1Loop keeps one body attack's request open from src until ctx ends,
// opening another whenever the server closes one. dials bounds the TLS
// handshakes at once.
func h1Loop(ctx context.Context, kind h2Kind, t *h2Target, src net.IP, dials chan struct{}, conns, requests *atomic.Int64, count func(string)) {
	for ctx.Err() == nil {
		select {
		case dials <- struct{}{}:
		case <-ctx.Done():
			return
		}
		var once sync.Once
		requests.Add(1)
		if err := h1Request(ctx, kind, t, src, conns, count, func() { once.Do(func() { <-dials }) }); err != nil && ctx.Err() == nil {
			count("connection refused or closed: " + short(err))
			select { // not a busy loop against a server that refuses
			case <-time.After(100 * time.Millisecond):
			case <-ctx.Done():
			}
		}
	}
}
