// Package simnotify sends what simulated machines announce (package sim,
// WithNotify) to a listener, as sushy-tools' fake driver sends its systems
// to EXTERNAL_NOTIFICATION_URL: an HTTP PUT of the system as JSON
// (Content-Type application/json), which Metal3's fake-ipa takes at its
// root. Unlike the fake driver, which sends from the request that made
// the change, it never holds up a BMC's answer: announcements wait in a
// bounded queue per sender (a machine always goes to the same sender, so
// its announcements arrive in order), a failed PUT is retried with
// back-off, and when a queue is full its oldest announcement makes room,
// so that a listener that comes back hears the newest states. A listener
// that is down is logged once (and once again when it is back), and every
// outcome is counted (Stats, vbmcd's metrics).
//
// What it does not do: decide what to announce (package sim does).
package simnotify

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
)

// Config says where announcements go and how hard to try.
type Config struct {
	URL string
	// CAFile verifies an https listener's certificate; without it (and
	// without a client certificate) the certificate is not verified, as
	// the fake driver does not verify it (EXTERNAL_NOTIFICATION_CAFILE).
	CAFile string
	// CertFile and KeyFile are a client certificate
	// (EXTERNAL_NOTIFICATION_CERTFILE, _KEYFILE); with them the listener's
	// certificate is verified against the system's roots unless CAFile
	// names others.
	CertFile, KeyFile string

	Senders  int           // concurrent senders (default 4)
	Queue    int           // announcements each sender holds (default 1024)
	Attempts int           // tries per announcement (default 5)
	Backoff  time.Duration // the wait before the first retry, doubled each time up to 5 s (default 200 ms)
	Timeout  time.Duration // one PUT's bound (default 10 s)
	Log      *zap.Logger
}

// Stats counts what became of the announcements.
type Stats struct {
	Sent    uint64 // delivered (a 2xx answer)
	Retries uint64 // PUTs tried again
	Failed  uint64 // given up: every attempt failed, or the listener refused it (4xx)
	Dropped uint64 // pushed out of a full queue before being sent
	Queued  int    // waiting now
}

// Notifier sends announcements.
type Notifier struct {
	cfg    Config
	client *http.Client
	queues []chan item
	log    *zap.Logger

	sent, retries, failed, dropped atomic.Uint64
	mu                             sync.Mutex
	down                           bool // the last announcement could not be delivered
	downSince                      time.Time
	lost                           uint64 // failures since the listener went down
}

type item struct {
	name string
	body []byte
}

// New checks cfg and makes a notifier; Run starts its senders.
func New(cfg Config) (*Notifier, error) {
	if cfg.Senders <= 0 {
		cfg.Senders = 4
	}
	if cfg.Queue <= 0 {
		cfg.Queue = 1024
	}
	if cfg.Attempts <= 0 {
		cfg.Attempts = 5
	}
	if cfg.Backoff <= 0 {
		cfg.Backoff = 200 * time.Millisecond
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 10 * time.Second
	}
	if cfg.Log == nil {
		cfg.Log = zap.NewNop()
	}
	tc := &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: cfg.CAFile == "" && cfg.CertFile == ""}
	if cfg.CAFile != "" {
		pem, err := os.ReadFile(cfg.CAFile)
		if err != nil {
			return nil, fmt.Errorf("notification CA: %w", err)
		}
		tc.RootCAs = x509.NewCertPool()
		if !tc.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("notification CA %s holds no PEM certificate", cfg.CAFile)
		}
	}
	if cfg.CertFile != "" {
		pair, err := tls.LoadX509KeyPair(cfg.CertFile, cfg.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("notification client certificate: %w", err)
		}
		tc.Certificates = []tls.Certificate{pair}
	}
	n := &Notifier{
		cfg: cfg, log: cfg.Log,
		client: &http.Client{
			Timeout: cfg.Timeout,
			Transport: &http.Transport{
				Proxy: nil, TLSClientConfig: tc, MaxIdleConnsPerHost: cfg.Senders,
				IdleConnTimeout: 90 * time.Second, ResponseHeaderTimeout: cfg.Timeout,
			},
			// The listener is the operator's: a redirect is not followed.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
		queues: make([]chan item, cfg.Senders),
	}
	for i := range n.queues {
		n.queues[i] = make(chan item, cfg.Queue)
	}
	return n, nil
}

// Notify queues one announcement of machine name. It never blocks: when
// the machine's queue is full, the oldest announcement there is dropped.
func (n *Notifier) Notify(name string, body []byte) {
	h := fnv.New32a()
	h.Write([]byte(name))
	q := n.queues[h.Sum32()%uint32(len(n.queues))]
	it := item{name: name, body: body}
	for {
		select {
		case q <- it:
			return
		default:
		}
		select {
		case <-q:
			n.dropped.Add(1)
		default:
		}
	}
}

// Run sends until ctx ends.
func (n *Notifier) Run(ctx context.Context) {
	var wg sync.WaitGroup
	for _, q := range n.queues {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-ctx.Done():
					return
				case it := <-q:
					n.deliver(ctx, it)
				}
			}
		}()
	}
	wg.Wait()
	n.client.CloseIdleConnections()
}

// Stats returns the counts so far.
func (n *Notifier) Stats() Stats {
	s := Stats{Sent: n.sent.Load(), Retries: n.retries.Load(), Failed: n.failed.Load(), Dropped: n.dropped.Load()}
	for _, q := range n.queues {
		s.Queued += len(q)
	}
	return s
}

// errRefused is a 4xx: the listener will not take the announcement
// however often it is sent.
var errRefused = errors.New("refused")

// deliver PUTs one announcement, retrying with back-off.
func (n *Notifier) deliver(ctx context.Context, it item) {
	wait := n.cfg.Backoff
	var err error
	for attempt := 1; ; attempt++ {
		if err = n.put(ctx, it.body); err == nil {
			n.sent.Add(1)
			n.up()
			return
		}
		if errors.Is(err, errRefused) || attempt == n.cfg.Attempts || ctx.Err() != nil {
			break
		}
		n.retries.Add(1)
		select {
		case <-ctx.Done():
		case <-time.After(wait):
		}
		wait = min(2*wait, 5*time.Second)
	}
	if ctx.Err() != nil {
		return
	}
	n.failed.Add(1)
	if errors.Is(err, errRefused) {
		// The listener answered: it is up, and did not want this one.
		n.up()
		n.log.Warn("notification refused by the listener", zap.String("machine", it.name), zap.String("url", n.cfg.URL), zap.Error(err))
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	n.lost++
	if !n.down {
		n.down, n.downSince = true, time.Now()
		n.log.Warn("notification listener is down: announcements are lost (counted in vbmcd_notifications_failed_total)",
			zap.String("url", n.cfg.URL), zap.String("machine", it.name), zap.Int("attempts", n.cfg.Attempts), zap.Error(err))
	}
}

// up notes a listener that answers again.
func (n *Notifier) up() {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.down {
		n.log.Info("notification listener answers again", zap.String("url", n.cfg.URL),
			zap.Duration("down", time.Since(n.downSince).Round(time.Millisecond)), zap.Uint64("lost", n.lost))
		n.down, n.lost = false, 0
	}
}

func (n *Notifier) put(ctx context.Context, body []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, n.cfg.URL, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("%w: %v", errRefused, err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "bmlab-vbmcd")
	resp, err := n.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	switch {
	case resp.StatusCode < 300:
		return nil
	case resp.StatusCode == http.StatusRequestTimeout || resp.StatusCode == http.StatusTooManyRequests:
	case resp.StatusCode < 500:
		return fmt.Errorf("%w: %s: %s", errRefused, resp.Status, bytes.TrimSpace(msg))
	}
	return fmt.Errorf("%s: %s", resp.Status, bytes.TrimSpace(msg))
}
