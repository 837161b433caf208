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
// is retried DeliveryRetryAttempts times DeliveryRetryIntervalSeconds apart,
// then dropped. Subscriptions live in memory: a restarted vbmcd has none,
// as after a BMC reset, and clients (Metal3's BMCEventSubscription) create
// them again.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/bmlab/bmlab/internal/accounts"
	"github.com/bmlab/bmlab/internal/machine"
)

const (
	eventServiceURI   = rootURI + "/EventService"
	subscriptionsURI  = eventServiceURI + "/Subscriptions"
	maxSubscriptions  = 64
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
	EventTypes  []string
	Prefixes    []string
	Headers     map[string]string

	queue   chan []byte
	dropped atomic.Int64
	failed  atomic.Int64
	sent    atomic.Int64
	stop    chan struct{}
}

// wants reports whether the subscription takes an event of this type from
// this registry.
func (sub *subscription) wants(eventType, prefix string) bool {
	if len(sub.EventTypes) > 0 && !slices.Contains(sub.EventTypes, eventType) {
		return false
	}
	return len(sub.Prefixes) == 0 || slices.Contains(sub.Prefixes, prefix)
}

type events struct {
	mu       sync.Mutex
	subs     map[string]*subscription
	next     int
	eventID  atomic.Int64
	attempts int
	interval time.Duration
	client   *http.Client
	log      *zap.Logger
	prev     map[string]*machine.Machine
}

func newEvents(log *zap.Logger) *events {
	return &events{
		subs: map[string]*subscription{}, attempts: 3, interval: 5 * time.Second, log: log,
		client: &http.Client{Timeout: 5 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }},
		prev:   map[string]*machine.Machine{},
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

// RunEvents turns the machines' changes into events until ctx ends.
func (s *Server) RunEvents(ctx context.Context) {
	ch, cancel := s.svc.Backend().Subscribe()
	defer cancel()
	for _, m := range s.svc.List() {
		s.events.prev[m.ID] = m
	}
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
	old := e.prev[m.ID]
	e.prev[m.ID] = m
	if old == nil {
		return
	}
	sys := systemsURI + "/" + m.ID
	if old.Power != m.Power {
		e.publish("ResourceUpdated", sys, fmt.Sprintf("The power state of system %s changed from %s to %s.", m.ID, old.Power, m.Power))
	}
	if old.Settings.Boot.Enabled == machine.BootOnce && m.Settings.Boot.Enabled == machine.BootDisabled {
		e.publish("ResourceUpdated", sys, fmt.Sprintf("The one-time boot override of system %s (%s) was used.", m.ID, old.Settings.Boot.Target))
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
			e.publish("ResourceUpdated", uri, fmt.Sprintf("Virtual media %s of system %s was inserted.", nm.Slot, m.ID))
		case was != "" && nm.Path == "":
			e.publish("ResourceUpdated", uri, fmt.Sprintf("Virtual media %s of system %s was ejected.", nm.Slot, m.ID))
		}
	}
}

// publish queues a ResourceEvent message for every subscription that wants
// it.
func (e *events) publish(eventType, origin, message string) {
	e.send(eventType, "ResourceEvent.1.0.ResourceChanged", message, "OK", origin, nil)
}

func (e *events) send(eventType, messageID, message, severity, origin string, args []string) {
	prefix, _, _ := strings.Cut(messageID, ".")
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, sub := range e.subs {
		if !sub.wants(eventType, prefix) {
			continue
		}
		id := strconv.FormatInt(e.eventID.Add(1), 10)
		rec := obj{
			"EventType": eventType, "EventId": id, "EventTimestamp": time.Now().UTC().Format(time.RFC3339),
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
			e.log.Warn("event dropped: the subscriber's queue is full", zap.String("subscription", sub.ID), zap.String("destination", sub.Destination))
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
			if e.post(sub, body) {
				sub.sent.Add(1)
			} else {
				sub.failed.Add(1)
			}
		}
	}
}

func (e *events) post(sub *subscription, body []byte) bool {
	for i := 0; i < e.attempts; i++ {
		if i > 0 {
			select {
			case <-sub.stop:
				return false
			case <-time.After(e.interval):
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

func (sub *subscription) resource() obj {
	o := obj{
		"@odata.id": subscriptionURI(sub.ID), "@odata.type": "#EventDestination.v1_13_0.EventDestination",
		"Id": sub.ID, "Name": "Event Subscription " + sub.ID,
		"Destination": sub.Destination, "Context": sub.Context, "Protocol": "Redfish",
		"SubscriptionType": "RedfishEvent", "EventFormatType": "Event",
		"EventTypes": nonNil(sub.EventTypes), "RegistryPrefixes": nonNil(sub.Prefixes),
		// Headers are write-only: they may carry the listener's secrets.
		"HttpHeaders": []obj{},
		"Oem":         obj{"Bmlab": obj{"Delivered": sub.sent.Load(), "Failed": sub.failed.Load(), "Dropped": sub.dropped.Load()}},
	}
	return o
}

func getEventService(s *Server, c *call) *apiError {
	e := s.events
	s.writeJSON(c, http.StatusOK, obj{
		"@odata.id": eventServiceURI, "@odata.type": "#EventService.v1_10_0.EventService",
		"Id": "EventService", "Name": "Event Service", "ServiceEnabled": true,
		"Status":                       obj{"State": "Enabled", "Health": "OK"},
		"DeliveryRetryAttempts":        e.attempts,
		"DeliveryRetryIntervalSeconds": int(e.interval / time.Second),
		"EventFormatTypes":             []string{"Event"},
		"RegistryPrefixes":             []string{"ResourceEvent", "Base"},
		"EventTypesForSubscription":    eventTypes,
		"Subscriptions":                ref{subscriptionsURI},
		"Actions": obj{"#EventService.SubmitTestEvent": obj{
			"target": eventServiceURI + "/Actions/EventService.SubmitTestEvent",
		}},
	})
	return nil
}

func getSubscriptions(s *Server, c *call) *apiError {
	s.events.mu.Lock()
	ids := make([]string, 0, len(s.events.subs))
	for id := range s.events.subs {
		ids = append(ids, id)
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
	if !ok {
		return nil, newError(http.StatusNotFound, MsgResourceNotFound, "EventDestination", c.params[0])
	}
	return sub, nil
}

func getSubscription(s *Server, c *call) *apiError {
	sub, err := s.subscription(c)
	if err != nil {
		return err
	}
	s.writeJSON(c, http.StatusOK, sub.resource())
	return nil
}

func deleteSubscription(s *Server, c *call) *apiError {
	sub, err := s.subscription(c)
	if err != nil {
		return err
	}
	s.events.mu.Lock()
	delete(s.events.subs, sub.ID)
	s.events.mu.Unlock()
	close(sub.stop)
	s.logChange(c, "event subscription deleted", zap.String("subscription", sub.ID))
	s.writeJSON(c, http.StatusOK, sub.resource())
	return nil
}

var subscriptionSchema = fields{
	"Destination": {kind: kindString}, "Context": {kind: kindString},
	"Protocol":         {kind: kindString, enum: []string{"Redfish"}},
	"SubscriptionType": {kind: kindString, enum: []string{"RedfishEvent"}},
	"EventFormatType":  {kind: kindString, enum: []string{"Event"}},
}

func postSubscription(s *Server, c *call) *apiError {
	body, err := readObject(c.r)
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
	if u, e := url.Parse(dest); e != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || len(dest) > maxDestinationLen {
		return newError(http.StatusBadRequest, MsgPropertyValueFormatError, truncate(dest, 64), "Destination").
			with("The destination must be an http or https URL of at most 1024 bytes.")
	}
	sub := &subscription{Destination: dest, Headers: map[string]string{}}
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
		return newError(http.StatusServiceUnavailable, MsgOperationNotAllowed).with(fmt.Sprintf("At most %d subscriptions; delete one first.", maxSubscriptions))
	}
	e.next++
	sub.ID = strconv.Itoa(e.next)
	sub.queue = make(chan []byte, subscriberQueue)
	sub.stop = make(chan struct{})
	e.subs[sub.ID] = sub
	e.mu.Unlock()
	go e.deliver(sub)
	s.logChange(c, "event subscription created", zap.String("subscription", sub.ID), zap.String("destination", truncate(dest, 256)))
	c.w.Header().Set("Location", subscriptionURI(sub.ID))
	s.writeJSON(c, http.StatusCreated, sub.resource())
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
			into[k] = str
		}
	}
	if len(into) > maxHeaders {
		return newError(http.StatusBadRequest, MsgPropertyValueOutOfRange, strconv.Itoa(len(into)), "HttpHeaders").with(fmt.Sprintf("At most %d headers.", maxHeaders))
	}
	return nil
}

func postSubmitTestEvent(s *Server, c *call) *apiError {
	const action = "EventService.SubmitTestEvent"
	body, err := actionParams(c, action, "EventType", "MessageId", "Message", "MessageArgs", "Severity", "MessageSeverity", "OriginOfCondition", "EventId", "EventTimestamp", "EventGroupId")
	if err != nil {
		return err
	}
	eventType := "Alert"
	if v, ok := body["EventType"]; ok {
		if eventType, err = enumParam(body, action, "EventType", eventTypes); err != nil {
			return err
		}
		_ = v
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
	s.events.send(eventType, str("MessageId", "Base.1.0.Success"), str("Message", "A test event from bmlab."), severity, str("OriginOfCondition", ""), args)
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
		r("EventService", route{get: getEventService}),
		r("EventService/Subscriptions", route{get: getSubscriptions, post: postSubscription, write: accounts.ConfigureManager}),
		r("EventService/Subscriptions/*", route{get: getSubscription, del: deleteSubscription, write: accounts.ConfigureManager}),
		r("EventService/Actions/EventService.SubmitTestEvent", route{post: postSubmitTestEvent, write: accounts.ConfigureManager}),
	}
}
