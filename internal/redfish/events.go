package redfish

// EventService (DSP0266 §12.1, EventService and EventDestination schemas):
// subscriptions to push events, fed by the machine model's events (which
// the libvirt backend derives from libvirt's lifecycle events).
//
// Events: a system's power state changed, its one-time boot override was
// used, a virtual media member was inserted or ejected. Each is a
// ResourceEvent.1.0.ResourceChanged message, EventType ResourceUpdated,
// with OriginOfCondition the resource. SubmitTestEvent sends the event the
// client describes (EventType Alert by default).
//
// Delivery never blocks the daemon: each subscription has its own bounded
// queue and goroutine; a full queue drops the event (counted), a failed POST
// is retried DeliveryRetryAttempts times DeliveryRetryIntervalSeconds apart.
// Then the subscription's DeliveryRetryPolicy decides: SuspendRetries (the
// default) keeps the subscription with Status.State Disabled and sends it
// nothing until EventDestination.ResumeSubscription; TerminateAfterRetries
// deletes it; RetryForever drops the event and goes on. A failing listener
// is never dropped without a trace: the subscription stays, or its end is
// logged at WARN.
//
// Destinations are held to vbmcd's outbound address policy, the one the
// image fetcher uses (internal/netpolicy, the --media-allow-loopback,
// --media-deny-private, --media-allow-cidr and --media-deny-cidr flags):
// an address refused by it is a 400 at subscription time when the
// Destination names it, and every delivery is checked again on the
// address dialled, so a name that resolves to loopback or to a metadata
// service is refused too. Headers that cloud metadata services take as
// credentials (metadataHeaders) are refused in HttpHeaders. A
// Destination's user:password is used, never shown: GET bodies and logs
// carry it redacted.
//
// A subscription made by an account bound to some systems receives the
// events of those systems only. Subscriptions and the retry settings are
// kept in the state directory (WithEventStore), so a restarted vbmcd keeps
// delivering to the listeners Metal3 and Ironic registered once.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/bmlab/bmlab/internal/accounts"
	"github.com/bmlab/bmlab/internal/machine"
	"github.com/bmlab/bmlab/internal/netpolicy"
)

const (
	eventServiceURI   = rootURI + "/EventService"
	subscriptionsURI  = eventServiceURI + "/Subscriptions"
	maxSubscriptions  = 128
	subscriberQueue   = 64
	maxDestinationLen = 1024
	maxContextLen     = 256
	maxHeaders        = 16
)

// Event types (EventType, deprecated in favour of RegistryPrefixes but
// still what most clients send).
var eventTypes = []string{"StatusChange", "ResourceUpdated", "ResourceAdded", "ResourceRemoved", "Alert", "MetricReport", "Other"}

type subscription struct {
	ID          string
	Destination string
	Context     string
	EventTypes  []string          `json:",omitempty"`
	Prefixes    []string          `json:",omitempty"`
	Headers     map[string]string `json:",omitempty"`
	Policy      string
	// Suspended is set when deliveries failed every retry under
	// SuspendRetries; nothing is sent until the subscription is resumed.
	Suspended bool `json:",omitempty"`
	// Systems limits the events to these systems' (nil: every system).
	Systems []string `json:",omitempty"`

	queue   chan []byte
	events  atomic.Int64 // EventIds given: each subscription counts its own
	dropped atomic.Int64
	failed  atomic.Int64
	sent    atomic.Int64
	stop    chan struct{}
}

// Delivery retry policies (EventDestination.DeliveryRetryPolicy).
const (
	policyTerminate = "TerminateAfterRetries"
	policySuspend   = "SuspendRetries"
	policyForever   = "RetryForever"
)

var retryPolicies = []string{policyTerminate, policySuspend, policyForever}

// metadataHeaders are header names (lower case) that cloud metadata
// services take as proof that a request comes from their own instance
// (GCP and IBM Cloud Metadata-Flavor, GCP's older X-Google-Metadata-Request,
// AWS IMDSv2's token headers, Azure's Metadata, Alibaba's token headers).
// An event posted with one of them to a metadata service (reached through
// a name, a proxy, or a range the operator allowed) would be answered as
// the instance's own request; they are refused in HttpHeaders. Oracle's
// "Authorization: Bearer Oracle" is refused by its value (oracleAuth).
var metadataHeaders = []string{
	"metadata-flavor", "x-google-metadata-request",
	"x-aws-ec2-metadata-token", "x-aws-ec2-metadata-token-ttl-seconds",
	"metadata",
	"x-aliyun-ecs-metadata-token", "x-aliyun-ecs-metadata-token-ttl-seconds",
}

const oracleAuth = "bearer oracle"

// refusedHeader says why a header may not be sent to a listener; "" when
// it may.
func refusedHeader(name, value string) string {
	n := strings.ToLower(name)
	if slices.Contains(metadataHeaders, n) ||
		n == "authorization" && strings.EqualFold(strings.TrimSpace(value), oracleAuth) {
		return fmt.Sprintf("The header %s is refused: cloud metadata services take it as a credential of their own instance.", truncate(name, 64))
	}
	return ""
}

// wants reports whether the subscription takes an event of this type from
// this registry about this system ("": an event about no one system).
func (sub *subscription) wants(eventType, prefix, system string) bool {
	if len(sub.EventTypes) > 0 && !slices.Contains(sub.EventTypes, eventType) {
		return false
	}
	if sub.Systems != nil && (system == "" || !slices.Contains(sub.Systems, system)) {
		return false
	}
	return len(sub.Prefixes) == 0 || slices.Contains(sub.Prefixes, prefix)
}

type events struct {
	policy   netpolicy.Policy // where deliveries may go
	mu       sync.Mutex
	subs     map[string]*subscription
	attempts int
	interval time.Duration
	client   *http.Client
	log      *zap.Logger
	prev     map[string]*machine.Machine
	path     string // where subscriptions are kept ("": in memory only)
	// stamp is the time an event about a system is stamped with (its
	// BMC's clock, clock.go).
	stamp func(system string) time.Time
}

func newEvents(log *zap.Logger) *events {
	e := &events{
		subs: map[string]*subscription{}, attempts: 3, interval: 5 * time.Second, log: log,
		prev:  map[string]*machine.Machine{},
		stamp: func(string) time.Time { return time.Now().UTC() },
		// vbmcd's default: loopback by --events-allow-loopback only.
		policy: netpolicy.Policy{}.Events(false),
	}
	e.client = deliveryClient(e.policy)
	return e
}

// deliveryClient posts events: directly, never through a proxy (the
// policy is checked on the address dialled), following no redirect.
func deliveryClient(p netpolicy.Policy) *http.Client {
	tr := &http.Transport{
		Proxy:                 nil,
		DialContext:           p.Dialer(5 * time.Second).DialContext,
		TLSHandshakeTimeout:   5 * time.Second,
		ResponseHeaderTimeout: 5 * time.Second,
		MaxIdleConnsPerHost:   4,
		IdleConnTimeout:       90 * time.Second,
	}
	return &http.Client{Transport: tr, Timeout: 5 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// WithEventPolicy holds event destinations to p, the outbound address
// policy the image fetcher has but for loopback (vbmcd passes its media
// policy's Events). Without it the default policy holds: loopback,
// link-local and unspecified addresses are refused, loopback naming
// --events-allow-loopback.
func WithEventPolicy(p netpolicy.Policy) Option {
	return func(s *Server) {
		s.events.policy = p
		s.events.client = deliveryClient(p)
	}
}

// WithEventRetry sets how often, and how far apart, a failed event delivery
// is retried.
func WithEventRetry(attempts int, interval time.Duration) Option {
	return func(s *Server) {
		s.events.attempts = max(attempts, 1)
		s.events.interval = interval
	}
}

// WithEventStore keeps subscriptions and retry settings in the file path
// (0600: HttpHeaders may hold a listener's secrets) and loads those kept
// there. A file that cannot be read is logged and left alone; the service
// starts with none rather than not at all.
func WithEventStore(path string) Option {
	return func(s *Server) {
		e := s.events
		e.path = path
		if err := e.load(); err != nil {
			e.log.Error("event subscriptions not loaded; starting with none", zap.String("file", path), zap.Error(err))
		}
	}
}

// stored is the file WithEventStore keeps.
type stored struct {
	Attempts      int
	IntervalSecs  int
	Subscriptions []*subscription
}

func (e *events) load() error {
	b, err := os.ReadFile(e.path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var st stored
	if err := json.Unmarshal(b, &st); err != nil {
		return fmt.Errorf("%s: %w", e.path, err)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if st.Attempts > 0 {
		e.attempts, e.interval = st.Attempts, time.Duration(st.IntervalSecs)*time.Second
	}
	for _, sub := range st.Subscriptions {
		// Ids were counted before issue 46, random since: both are kept.
		if sub.ID == "" || len(sub.ID) > 32 || sub.Destination == "" || e.subs[sub.ID] != nil || len(e.subs) >= maxSubscriptions {
			continue
		}
		if !slices.Contains(retryPolicies, sub.Policy) {
			sub.Policy = policySuspend
		}
		for k, v := range sub.Headers {
			if why := refusedHeader(k, v); why != "" {
				delete(sub.Headers, k)
				e.log.Warn("event subscription header dropped: "+why, zap.String("subscription", sub.ID))
			}
		}
		e.start(sub)
	}
	return nil
}

// save writes the subscriptions and settings; e.mu is held.
func (e *events) save() {
	if e.path == "" {
		return
	}
	st := stored{Attempts: e.attempts, IntervalSecs: int(e.interval / time.Second)}
	for _, sub := range e.subs {
		st.Subscriptions = append(st.Subscriptions, sub)
	}
	slices.SortFunc(st.Subscriptions, func(a, b *subscription) int { x, _ := strconv.Atoi(a.ID); y, _ := strconv.Atoi(b.ID); return x - y })
	b, _ := json.MarshalIndent(st, "", "  ")
	tmp := e.path + ".tmp"
	err := os.WriteFile(tmp, b, 0o600)
	if err == nil {
		err = os.Rename(tmp, e.path)
	}
	if err != nil {
		e.log.Error("event subscriptions not saved; they will be lost at restart", zap.String("file", e.path), zap.Error(err))
	}
}

// start gives a new subscription its queue and sender; e.mu is held.
func (e *events) start(sub *subscription) {
	sub.queue = make(chan []byte, subscriberQueue)
	sub.stop = make(chan struct{})
	e.subs[sub.ID] = sub
	go e.deliver(sub)
}

// remove deletes a subscription and stops its sender; it reports whether
// the subscription was still there.
func (e *events) remove(sub *subscription) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.subs[sub.ID] != sub {
		return false
	}
	delete(e.subs, sub.ID)
	close(sub.stop)
	e.save()
	return true
}

// view renders a subscription; its writable fields change under e.mu.
func (e *events) view(sub *subscription) obj {
	e.mu.Lock()
	defer e.mu.Unlock()
	return sub.resource(true)
}

// viewFor renders a subscription for who: a caller who may not manage
// subscriptions (ConfigureManager) sees the Destination's query string
// redacted too, which often carries the listener's token.
func (e *events) viewFor(sub *subscription, who *principal) obj {
	e.mu.Lock()
	defer e.mu.Unlock()
	return sub.resource(who.priv&accounts.ConfigureManager != 0)
}

func (e *events) policyOf(sub *subscription) string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return sub.Policy
}

func (e *events) retry() (int, time.Duration) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.attempts, e.interval
}

// WatchEvents turns the machines' changes into events, in a goroutine of its
// own, until ctx ends. The subscription to the backend is in place when
// WatchEvents returns, so no change made after it is missed; the returned
// channel is closed when the goroutine has stopped.
func (s *Server) WatchEvents(ctx context.Context) <-chan struct{} {
	ch, cancel := s.svc.Backend().Subscribe()
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer cancel()
		for {
			select {
			case <-ctx.Done():
				s.events.stopAll()
				return
			case ev, ok := <-ch:
				if !ok {
					return
				}
				s.events.machineEvent(ev)
			}
		}
	}()
	return done
}

// machineEvent compares a machine's new snapshot with the last one seen.
func (e *events) machineEvent(ev machine.Event) {
	if ev.Kind == machine.EventRemoved {
		delete(e.prev, ev.ID)
		return
	}
	m := ev.Machine
	if m == nil {
		return
	}
	// The last snapshot seen, else the one the backend says this one
	// replaced: machines that never changed are not kept here, which at
	// 100,000 simulated machines would be all of them.
	old := e.prev[m.ID]
	if old == nil {
		old = ev.Prev
	}
	e.prev[m.ID] = m
	if old == nil {
		return
	}
	sys := systemsURI + "/" + m.ID
	if old.Power != m.Power {
		e.publish(m.ID, "ResourceUpdated", sys, fmt.Sprintf("The power state of system %s changed from %s to %s.", m.ID, old.Power, m.Power))
	}
	if old.Settings.Boot.Enabled == machine.BootOnce && m.Settings.Boot.Enabled == machine.BootDisabled {
		e.publish(m.ID, "ResourceUpdated", sys, fmt.Sprintf("The one-time boot override of system %s (%s) was used.", m.ID, old.Settings.Boot.Target))
	}
	for _, nm := range m.Settings.Media {
		was := ""
		for _, om := range old.Settings.Media {
			if om.Slot == nm.Slot {
				was = om.Path
			}
		}
		uri := managersURI + "/" + m.ID + "/VirtualMedia/" + string(nm.Slot)
		switch {
		case was == "" && nm.Path != "":
			e.publish(m.ID, "ResourceUpdated", uri, fmt.Sprintf("Virtual media %s of system %s was inserted.", nm.Slot, m.ID))
		case was != "" && nm.Path == "":
			e.publish(m.ID, "ResourceUpdated", uri, fmt.Sprintf("Virtual media %s of system %s was ejected.", nm.Slot, m.ID))
		}
	}
}

// publish queues a ResourceEvent message about a system for every
// subscription that wants it.
func (e *events) publish(system, eventType, origin, message string) {
	e.send(system, eventType, "ResourceEvent.1.0.ResourceChanged", message, "OK", origin, nil)
}

func (e *events) send(system, eventType, messageID, message, severity, origin string, args []string) {
	prefix, _, _ := strings.Cut(messageID, ".")
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, sub := range e.subs {
		if !sub.wants(eventType, prefix, system) {
			continue
		}
		if sub.Suspended {
			sub.dropped.Add(1)
			continue
		}
		// Counted per subscription, not across the service: a
		// subscriber at one BMC learns nothing of another's events
		// (issue 46), and a gap is an event of its own it lost.
		id := strconv.FormatInt(sub.events.Add(1), 10)
		rec := obj{
			"EventType": eventType, "EventId": id, "EventTimestamp": e.stamp(system).Format(dateTimeLayout),
			"MessageId": messageID, "Message": message, "MessageArgs": nonNil(args),
			"Severity": severity, "MessageSeverity": severity,
		}
		if origin != "" {
			rec["OriginOfCondition"] = ref{origin}
		}
		body, _ := json.Marshal(obj{
			"@odata.type": "#Event.v1_7_0.Event", "Id": id, "Name": "bmlab event",
			"Context": sub.Context, "Events": []obj{rec},
		})
		select {
		case sub.queue <- body:
		default:
			sub.dropped.Add(1)
			e.log.Warn("event dropped: the subscriber's queue is full", zap.String("subscription", sub.ID), zap.String("destination", sub.shown()))
		}
	}
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// deliver posts a subscription's events in order, one at a time.
func (e *events) deliver(sub *subscription) {
	for {
		select {
		case <-sub.stop:
			return
		case body := <-sub.queue:
			if e.suspended(sub) {
				sub.dropped.Add(1) // queued before the suspension
				continue
			}
			if e.post(sub, body) {
				sub.sent.Add(1)
				continue
			}
			sub.failed.Add(1)
			switch e.policyOf(sub) {
			case policyTerminate:
				if e.remove(sub) {
					e.log.Warn("event subscription terminated: its listener failed every retry (DeliveryRetryPolicy TerminateAfterRetries)",
						zap.String("subscription", sub.ID), zap.String("destination", sub.shown()))
					return
				}
			case policySuspend:
				e.suspend(sub)
				e.log.Warn("event subscription suspended: its listener failed every retry (DeliveryRetryPolicy SuspendRetries); "+
					"POST EventDestination.ResumeSubscription resumes it",
					zap.String("subscription", sub.ID), zap.String("destination", sub.shown()))
			}
		}
	}
}

func (e *events) suspended(sub *subscription) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return sub.Suspended
}

func (e *events) suspend(sub *subscription) {
	e.mu.Lock()
	defer e.mu.Unlock()
	sub.Suspended = true
	e.save()
}

// shown is the Destination as logs show it: a password and the query
// string's values redacted, cut to 256 bytes.
func (sub *subscription) shown() string {
	return truncate(redactQuery(redactURL(sub.Destination)), 256)
}

// redactURL hides the password of a URL's user:password.
func redactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil || u.User == nil {
		return s
	}
	return u.Redacted()
}

// redactQuery hides the values of a URL's query string
// (?token=secret becomes ?token=xxxxx), and its fragment.
func redactQuery(s string) string {
	u, err := url.Parse(s)
	if err != nil || (u.RawQuery == "" && u.Fragment == "" && !u.ForceQuery) {
		return s
	}
	parts := strings.Split(u.RawQuery, "&")
	for i, kv := range parts {
		if k, _, ok := strings.Cut(kv, "="); ok {
			parts[i] = k + "=xxxxx"
		} else if kv != "" {
			parts[i] = "xxxxx"
		}
	}
	u.RawQuery = strings.Join(parts, "&")
	u.Fragment, u.RawFragment = "", ""
	return u.String()
}

func (e *events) post(sub *subscription, body []byte) bool {
	attempts, interval := e.retry()
	for i := 0; i < attempts; i++ {
		if i > 0 {
			select {
			case <-sub.stop:
				return false
			case <-time.After(interval):
			}
		}
		req, err := http.NewRequest(http.MethodPost, sub.Destination, bytes.NewReader(body))
		if err != nil {
			return false
		}
		req.Header.Set("Content-Type", "application/json")
		for k, v := range sub.Headers {
			req.Header.Set(k, v)
		}
		resp, err := e.client.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode/100 == 2 {
				return true
			}
			err = fmt.Errorf("status %d", resp.StatusCode)
		}
		// net/http's errors name the URL with its password stripped but
		// its query string whole: a destination's ?token= is the
		// subscriber's secret, never logged.
		var ue *url.Error
		if errors.As(err, &ue) {
			ue.URL = redactQuery(redactURL(ue.URL))
		}
		e.log.Info("event delivery failed", zap.String("subscription", sub.ID), zap.Int("attempt", i+1), zap.Error(err))
	}
	return false
}

func (e *events) stopAll() {
	e.mu.Lock()
	defer e.mu.Unlock()
	for id, sub := range e.subs {
		close(sub.stop)
		delete(e.subs, id)
	}
}

// --- resources ---

func subscriptionURI(id string) string { return subscriptionsURI + "/" + id }

// resource renders the subscription; full shows the Destination's query
// string (to those who manage subscriptions).
func (sub *subscription) resource(full bool) obj {
	dest := redactURL(sub.Destination)
	if !full {
		dest = redactQuery(dest)
	}
	o := obj{
		"@odata.id": subscriptionURI(sub.ID), "@odata.type": "#EventDestination.v1_13_0.EventDestination",
		"Id": sub.ID, "Name": "Event Subscription " + sub.ID,
		"Destination": dest, "Context": sub.Context, "Protocol": "Redfish",
		"SubscriptionType": "RedfishEvent", "EventFormatType": "Event",
		"DeliveryRetryPolicy": sub.Policy,
		"Status":              subscriptionStatus(sub.Suspended),
		"Actions": obj{"#EventDestination.ResumeSubscription": obj{
			"target": subscriptionURI(sub.ID) + "/Actions/EventDestination.ResumeSubscription",
		}},
		"EventTypes": nonNil(sub.EventTypes), "RegistryPrefixes": nonNil(sub.Prefixes),
		// Headers are write-only: they may carry the listener's secrets.
		"HttpHeaders": []obj{},
		"Oem":         obj{"Bmlab": obj{"Delivered": sub.sent.Load(), "Failed": sub.failed.Load(), "Dropped": sub.dropped.Load()}},
	}
	return o
}

// subscriptionStatus: a suspended subscription reads Disabled, as the
// EventDestination schema has it for SuspendRetries.
func subscriptionStatus(suspended bool) obj {
	if suspended {
		return obj{"State": "Disabled", "Health": "Warning"}
	}
	return obj{"State": "Enabled", "Health": "OK"}
}

func (e *events) resource() obj {
	attempts, interval := e.retry()
	return obj{
		"@odata.id": eventServiceURI, "@odata.type": "#EventService.v1_10_0.EventService",
		"Id": "EventService", "Name": "Event Service", "ServiceEnabled": true,
		"Status":                       obj{"State": "Enabled", "Health": "OK"},
		"DeliveryRetryAttempts":        attempts,
		"DeliveryRetryIntervalSeconds": int(interval / time.Second),
		"EventFormatTypes":             []string{"Event"},
		"RegistryPrefixes":             []string{"ResourceEvent", "Base"},
		"EventTypesForSubscription":    eventTypes,
		"Subscriptions":                ref{subscriptionsURI},
		"Actions": obj{"#EventService.SubmitTestEvent": obj{
			"target": eventServiceURI + "/Actions/EventService.SubmitTestEvent",
		}},
	}
}

func getEventService(s *Server, c *call) *apiError {
	s.writeJSON(c, http.StatusOK, s.events.resource())
	return nil
}

var eventServicePatch = fields{"DeliveryRetryAttempts": {kind: kindInt}, "DeliveryRetryIntervalSeconds": {kind: kindInt}}

// patchEventService changes the retry settings: 1 to 10 attempts, 1 to 3600
// seconds apart.
func patchEventService(s *Server, c *call) *apiError {
	if err := serviceWide(c); err != nil {
		return err
	}
	e := s.events
	body, err := readPatch(c, eventServicePatch, e.resource())
	if err != nil {
		return err
	}
	attempts, interval := e.retry()
	if v, ok := body["DeliveryRetryAttempts"].(float64); ok {
		if v < 1 || v > 10 {
			return newError(http.StatusBadRequest, MsgPropertyValueOutOfRange, argText(v), "DeliveryRetryAttempts").with("From 1 to 10.")
		}
		attempts = int(v)
	}
	if v, ok := body["DeliveryRetryIntervalSeconds"].(float64); ok {
		if v < 1 || v > 3600 {
			return newError(http.StatusBadRequest, MsgPropertyValueOutOfRange, argText(v), "DeliveryRetryIntervalSeconds").with("From 1 to 3600.")
		}
		interval = time.Duration(v) * time.Second
	}
	e.mu.Lock()
	e.attempts, e.interval = attempts, interval
	e.save()
	e.mu.Unlock()
	s.logChange(c, "event retry settings changed", zap.Int("attempts", attempts), zap.Duration("interval", interval))
	return getEventService(s, c)
}

func getSubscriptions(s *Server, c *call) *apiError {
	s.events.mu.Lock()
	ids := make([]string, 0, len(s.events.subs))
	for id, sub := range s.events.subs {
		if s.seesSubscription(c.who, sub) {
			ids = append(ids, id)
		}
	}
	s.events.mu.Unlock()
	slices.SortFunc(ids, func(a, b string) int { x, _ := strconv.Atoi(a); y, _ := strconv.Atoi(b); return x - y })
	members := make([]ref, len(ids))
	for i, id := range ids {
		members[i] = ref{subscriptionURI(id)}
	}
	s.writeJSON(c, http.StatusOK, obj{
		"@odata.id": subscriptionsURI, "@odata.type": "#EventDestinationCollection.EventDestinationCollection",
		"Name": "Event Subscriptions", "Members@odata.count": len(members), "Members": members,
	})
	return nil
}

func (s *Server) subscription(c *call) (*subscription, *apiError) {
	s.events.mu.Lock()
	defer s.events.mu.Unlock()
	sub, ok := s.events.subs[c.params[0]]
	if !ok || !s.seesSubscription(c.who, sub) {
		return nil, newError(http.StatusNotFound, MsgResourceNotFound, "EventDestination", c.params[0])
	}
	return sub, nil
}

// scope is the systems whose events a subscription of this caller may
// receive (nil: every system).
func (s *Server) scope(p *principal) []string {
	if p.everywhere() {
		return nil
	}
	if p.only != "" {
		return []string{p.only}
	}
	out := []string{}
	for _, m := range s.svc.List() {
		if p.canAccess(m) {
			out = append(out, m.ID)
		}
	}
	return out
}

// seesSubscription reports whether the caller may see a subscription: one
// limited to some systems sees the subscriptions whose systems it reaches.
func (s *Server) seesSubscription(p *principal, sub *subscription) bool {
	if p.everywhere() {
		return true
	}
	if sub.Systems == nil {
		return false
	}
	mine := s.scope(p)
	for _, id := range sub.Systems {
		if !slices.Contains(mine, id) {
			return false
		}
	}
	return true
}

func getSubscription(s *Server, c *call) *apiError {
	sub, err := s.subscription(c)
	if err != nil {
		return err
	}
	s.writeJSON(c, http.StatusOK, s.events.viewFor(sub, c.who))
	return nil
}

func deleteSubscription(s *Server, c *call) *apiError {
	sub, err := s.subscription(c)
	if err != nil {
		return err
	}
	s.events.remove(sub)
	s.logChange(c, "event subscription deleted", zap.String("subscription", sub.ID))
	s.writeJSON(c, http.StatusOK, s.events.view(sub))
	return nil
}

var subscriptionSchema = fields{
	"Destination": {kind: kindString}, "Context": {kind: kindString},
	"Protocol":            {kind: kindString, enum: []string{"Redfish"}},
	"SubscriptionType":    {kind: kindString, enum: []string{"RedfishEvent"}},
	"EventFormatType":     {kind: kindString, enum: []string{"Event"}},
	"DeliveryRetryPolicy": {kind: kindString, enum: retryPolicies},
}

var subscriptionPatch = fields{
	"Context":             {kind: kindString},
	"DeliveryRetryPolicy": {kind: kindString, enum: retryPolicies},
	"HttpHeaders":         {kind: kindArray},
}

// patchSubscription changes a subscription's Context, retry policy or
// HttpHeaders (which replace the ones it had): the writable properties
// of EventDestination.
func patchSubscription(s *Server, c *call) *apiError {
	sub, err := s.subscription(c)
	if err != nil {
		return err
	}
	e := s.events
	body, err := readPatch(c, subscriptionPatch, e.view(sub))
	if err != nil {
		return err
	}
	if v, ok := body["Context"].(string); ok && len(v) > maxContextLen {
		return newError(http.StatusBadRequest, MsgPropertyValueFormatError, truncate(v, 64), "Context").with("At most 256 bytes.")
	}
	var headers map[string]string
	if h, ok := body["HttpHeaders"]; ok {
		headers = map[string]string{}
		if err := readHeaders(h, headers); err != nil {
			return err
		}
	}
	e.mu.Lock()
	if headers != nil {
		sub.Headers = headers
	}
	if v, ok := body["Context"].(string); ok {
		sub.Context = v
	}
	if v, ok := body["DeliveryRetryPolicy"].(string); ok {
		sub.Policy = v
	}
	e.save()
	cur := sub.resource(true)
	e.mu.Unlock()
	s.logChange(c, "event subscription changed", zap.String("subscription", sub.ID))
	s.writeJSON(c, http.StatusOK, cur)
	return nil
}

func postSubscription(s *Server, c *call) *apiError {
	body, err := readObject(c)
	if err != nil {
		return err
	}
	// Lists and HttpHeaders are checked by hand; the schema checks the rest.
	rest := map[string]any{}
	for k, v := range body {
		if k != "EventTypes" && k != "RegistryPrefixes" && k != "HttpHeaders" {
			rest[k] = v
		}
	}
	if msgs := subscriptionSchema.check(rest, nil); len(msgs) > 0 {
		return &apiError{status: http.StatusBadRequest, messages: msgs}
	}
	dest, ok := body["Destination"].(string)
	if !ok {
		return newError(http.StatusBadRequest, MsgPropertyMissing, "Destination")
	}
	u, perr := url.Parse(dest)
	if perr != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || len(dest) > maxDestinationLen {
		return newError(http.StatusBadRequest, MsgPropertyValueFormatError, truncate(redactURL(dest), 64), "Destination").
			with("The destination must be an http or https URL of at most 1024 bytes.")
	}
	// An address the policy refuses is refused now; a name is checked on
	// every delivery, on the address it resolves to.
	if a, err := netip.ParseAddr(strings.Trim(u.Hostname(), "[]")); err == nil {
		if why := s.events.policy.Why(a); why != "" {
			// Refused by vbmcd's policy, not by the listener: the
			// message says so and which flag allows the address (as for
			// a virtual media image), not "choose a value from the
			// enumeration list".
			m := newMessage(MsgAccessDenied, truncate(redactQuery(redactURL(dest)), maxArgText))
			m.Resolution = "The BMC did not subscribe: its outbound address policy refuses the destination's address (" + why +
				"). Use a listener the BMC may reach, or have the BMC's administrator allow the address."
			return &apiError{status: http.StatusBadRequest, messages: []messageObject{m}}
		}
	}
	sub := &subscription{Destination: dest, Headers: map[string]string{}, Policy: policySuspend, Systems: s.scope(c.who)}
	if v, ok := body["DeliveryRetryPolicy"].(string); ok {
		sub.Policy = v
	}
	if v, ok := body["Context"].(string); ok {
		if len(v) > maxContextLen {
			return newError(http.StatusBadRequest, MsgPropertyValueFormatError, truncate(v, 64), "Context").with("At most 256 bytes.")
		}
		sub.Context = v
	}
	if sub.EventTypes, err = stringList(body, "EventTypes", eventTypes); err != nil {
		return err
	}
	if sub.Prefixes, err = stringList(body, "RegistryPrefixes", []string{"ResourceEvent", "Base"}); err != nil {
		return err
	}
	if h, ok := body["HttpHeaders"]; ok {
		if err := readHeaders(h, sub.Headers); err != nil {
			return err
		}
	}
	e := s.events
	e.mu.Lock()
	if len(e.subs) >= maxSubscriptions {
		e.mu.Unlock()
		return newError(http.StatusBadRequest, MsgCreateLimitReachedForResource).with(fmt.Sprintf("At most %d subscriptions; delete one first.", maxSubscriptions))
	}
	// A random id, as a session's: a count would tell one BMC how many
	// subscriptions the others made (issue 46).
	for sub.ID = randomHex(8); e.subs[sub.ID] != nil; sub.ID = randomHex(8) {
	}
	e.start(sub)
	e.save()
	e.mu.Unlock()
	s.logChange(c, "event subscription created", zap.String("subscription", sub.ID), zap.String("destination", sub.shown()))
	c.w.Header().Set("Location", subscriptionURI(sub.ID))
	s.writeJSON(c, http.StatusCreated, s.events.view(sub))
	return nil
}

func stringList(body map[string]any, name string, allowed []string) ([]string, *apiError) {
	v, ok := body[name]
	if !ok || v == nil {
		return nil, nil
	}
	list, ok := v.([]any)
	if !ok {
		return nil, newError(http.StatusBadRequest, MsgPropertyValueTypeError, argText(v), name)
	}
	var out []string
	for _, x := range list {
		str, ok := x.(string)
		if !ok {
			return nil, newError(http.StatusBadRequest, MsgPropertyValueTypeError, argText(x), name)
		}
		if !slices.Contains(allowed, str) {
			return nil, newError(http.StatusBadRequest, MsgPropertyValueNotInList, str, name)
		}
		out = append(out, str)
	}
	return out, nil
}

// readHeaders takes HttpHeaders as an object or a list of objects of
// string values (the schema's array of objects; clients send either).
func readHeaders(v any, into map[string]string) *apiError {
	var objs []any
	switch h := v.(type) {
	case map[string]any:
		objs = []any{h}
	case []any:
		objs = h
	default:
		return newError(http.StatusBadRequest, MsgPropertyValueTypeError, argText(v), "HttpHeaders")
	}
	for _, o := range objs {
		m, ok := o.(map[string]any)
		if !ok {
			return newError(http.StatusBadRequest, MsgPropertyValueTypeError, argText(o), "HttpHeaders")
		}
		for k, x := range m {
			str, ok := x.(string)
			if !ok || http.CanonicalHeaderKey(k) == "" || strings.ContainsAny(k+str, "\r\n") {
				return newError(http.StatusBadRequest, MsgPropertyValueFormatError, argText(x), "HttpHeaders/"+truncate(k, 64))
			}
			if why := refusedHeader(k, str); why != "" {
				return newError(http.StatusBadRequest, MsgPropertyValueNotInList, truncate(k, 64), "HttpHeaders").with(why)
			}
			into[k] = str
		}
	}
	if len(into) > maxHeaders {
		return newError(http.StatusBadRequest, MsgPropertyValueOutOfRange, strconv.Itoa(len(into)), "HttpHeaders").with(fmt.Sprintf("At most %d headers.", maxHeaders))
	}
	return nil
}

// postResumeSubscription resumes a subscription suspended under
// SuspendRetries (EventDestination.ResumeSubscription); events from now on
// are delivered, those of the suspension are not.
func postResumeSubscription(s *Server, c *call) *apiError {
	sub, err := s.subscription(c)
	if err != nil {
		return err
	}
	if _, err := actionParams(c, "EventDestination.ResumeSubscription", "DeliverBufferedEventDuration"); err != nil {
		return err
	}
	e := s.events
	e.mu.Lock()
	was := sub.Suspended
	sub.Suspended = false
	e.save()
	e.mu.Unlock()
	if was {
		s.logChange(c, "event subscription resumed", zap.String("subscription", sub.ID))
	}
	c.w.WriteHeader(http.StatusNoContent)
	return nil
}

func postSubmitTestEvent(s *Server, c *call) *apiError {
	const action = "EventService.SubmitTestEvent"
	body, err := actionParams(c, action, "EventType", "MessageId", "Message", "MessageArgs", "Severity", "MessageSeverity", "OriginOfCondition", "EventId", "EventTimestamp", "EventGroupId")
	if err != nil {
		return err
	}
	eventType, err := optionalEnum(body, action, "EventType", "Alert", eventTypes)
	if err != nil {
		return err
	}
	str := func(name, def string) string {
		if v, ok := body[name].(string); ok {
			return truncate(v, 1024)
		}
		return def
	}
	var args []string
	if l, ok := body["MessageArgs"].([]any); ok {
		for _, a := range l {
			args = append(args, truncate(fmt.Sprint(a), 256))
		}
	}
	severity := str("MessageSeverity", str("Severity", "OK"))
	// A test event from an account bound to one system goes to that
	// system's subscriptions only.
	system := ""
	if sc := s.scope(c.who); len(sc) > 0 {
		system = sc[0]
	}
	s.events.send(system, eventType, str("MessageId", "Base.1.0.Success"), str("Message", "A test event from bmlab."), severity, str("OriginOfCondition", ""), args)
	c.w.WriteHeader(http.StatusNoContent)
	return nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// eventRoutes are the EventService's; subscribing needs ConfigureManager.
func eventRoutes() []*route {
	return []*route{
		r("EventService", route{get: getEventService, patch: patchEventService, write: accounts.ConfigureManager}),
		r("EventService/Subscriptions", route{get: getSubscriptions, post: postSubscription, write: accounts.ConfigureManager}),
		r("EventService/Subscriptions/*", route{get: getSubscription, patch: patchSubscription, del: deleteSubscription, write: accounts.ConfigureManager}),
		r("EventService/Subscriptions/*/Actions/EventDestination.ResumeSubscription", route{post: postResumeSubscription, write: accounts.ConfigureManager}),
		r("EventService/Actions/EventService.SubmitTestEvent", route{post: postSubmitTestEvent, write: accounts.ConfigureManager}),
	}
}
