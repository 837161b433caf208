// Package metrics is vbmcd's Prometheus registry: what the faces count on
// their hot paths (requests by face, route or command, and status, with
// latency histograms), and gauges and counters read from the parts that
// already keep the numbers (sessions, libvirt connections, the media cache)
// at scrape time, so a scrape costs the daemon nothing in between.
//
// Every method works on a nil *Registry and does nothing: the faces need no
// metrics to run.
package metrics

import (
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Registry holds vbmcd's metrics.
type Registry struct {
	reg       *prometheus.Registry
	requests  *prometheus.CounterVec
	latency   *prometheus.HistogramVec
	ipmi      *prometheus.CounterVec
	power     *prometheus.CounterVec
	powerTime *prometheus.HistogramVec
	logins    *prometheus.CounterVec
	setups    *prometheus.CounterVec

	// redfishSeries keeps each (route, method, code)'s counter and
	// histogram once looked up (a redfishKey → *RedfishSeries): a request
	// then costs one map read, no label hashing, no allocation. Routes,
	// methods and codes are few, so the map stays small.
	redfishSeries sync.Map
}

type redfishKey struct {
	route, method string
	code          int
}

// RedfishSeries is one route, method and status code's request counter
// and latency histogram: a face that keeps it counts a request without
// looking anything up (Registry.RedfishSeries).
type RedfishSeries struct {
	requests prometheus.Counter
	latency  prometheus.Observer
}

// Observe counts one answered request that took took. A nil series counts
// nothing.
func (s *RedfishSeries) Observe(took time.Duration) {
	if s == nil {
		return
	}
	s.requests.Inc()
	s.latency.Observe(took.Seconds())
}

// New returns a registry with the Go runtime and process collectors.
func New() *Registry {
	r := &Registry{reg: prometheus.NewRegistry()}
	r.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	r.requests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "vbmcd_redfish_requests_total",
		Help: "Redfish requests answered, by route (the URI pattern, * for an id), method and HTTP status.",
	}, []string{"route", "method", "code"})
	r.latency = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "vbmcd_redfish_request_duration_seconds",
		Help:    "Time to answer a Redfish request, by route and method.",
		Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5},
	}, []string{"route", "method"})
	r.ipmi = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "vbmcd_ipmi_requests_total",
		Help: "IPMI requests answered in a session, by command (netfn/cmd in hex) and completion code.",
	}, []string{"command", "code"})
	r.power = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "vbmcd_power_actions_total",
		Help: "Power actions (Redfish Reset, IPMI chassis control), by reset type and result (ok or the error's kind).",
	}, []string{"type", "result"})
	r.powerTime = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "vbmcd_power_action_duration_seconds",
		Help:    "Time a power action took in the backend (a start, a stop, a reset), by reset type.",
		Buckets: []float64{.001, .01, .05, .1, .25, .5, 1, 2, 5, 10, 30},
	}, []string{"type"})
	r.logins = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "vbmcd_login_failures_total",
		Help: "Refused logins, by face.",
	}, []string{"face"})
	r.setups = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "vbmcd_ipmi_session_setups_dropped_total",
		Help: "IPMI session set-ups (Open Session to RAKP 3) pushed out or refused for room, by why: source (a source's oldest beyond its pending bound), evicted (a random pending one, the table full), refused (the table full of established sessions).",
	}, []string{"why"})
	r.reg.MustRegister(r.requests, r.latency, r.ipmi, r.power, r.powerTime, r.logins, r.setups)
	return r
}

// Handler serves the registry in Prometheus' text format.
func (r *Registry) Handler() http.Handler {
	if r == nil {
		return http.NotFoundHandler()
	}
	return promhttp.HandlerFor(r.reg, promhttp.HandlerOpts{Registry: r.reg})
}

// Gauge registers a gauge read from fn at scrape time.
func (r *Registry) Gauge(name, help string, fn func() float64) {
	if r != nil {
		r.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, fn))
	}
}

// Counter registers a counter read from fn at scrape time; fn must never
// go down.
func (r *Registry) Counter(name, help string, fn func() float64) {
	if r != nil {
		r.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help}, fn))
	}
}

// CounterBy registers a counter read at scrape time for each value of
// one label: fn(value) must never go down.
func (r *Registry) CounterBy(name, help, label string, values []string, fn func(value string) float64) {
	if r == nil {
		return
	}
	for _, v := range values {
		r.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help, ConstLabels: prometheus.Labels{label: v}},
			func() float64 { return fn(v) }))
	}
}

// RedfishSeries returns the series of a route, method and code (nil on a
// nil registry); looked up once each.
func (r *Registry) RedfishSeries(route, method string, code int) *RedfishSeries {
	if r == nil {
		return nil
	}
	k := redfishKey{route, method, code}
	v, ok := r.redfishSeries.Load(k)
	if !ok {
		v, _ = r.redfishSeries.LoadOrStore(k, &RedfishSeries{
			requests: r.requests.WithLabelValues(route, method, strconv.Itoa(code)),
			latency:  r.latency.WithLabelValues(route, method),
		})
	}
	return v.(*RedfishSeries)
}

// Redfish counts one answered request.
func (r *Registry) Redfish(route, method string, code int, took time.Duration) {
	r.RedfishSeries(route, method, code).Observe(took)
}

// IPMI counts one answered request.
func (r *Registry) IPMI(netFn, cmd, code uint8) {
	if r == nil {
		return
	}
	r.ipmi.WithLabelValues(hex(netFn)+"/"+hex(cmd), hex(code)).Inc()
}

// Power counts one power action and the time it took.
func (r *Registry) Power(resetType, result string, took time.Duration) {
	if r == nil {
		return
	}
	r.power.WithLabelValues(resetType, result).Inc()
	r.powerTime.WithLabelValues(resetType).Observe(took.Seconds())
}

// LoginFailed counts a refused login on face ("redfish", "ipmi").
func (r *Registry) LoginFailed(face string) {
	if r != nil {
		r.logins.WithLabelValues(face).Inc()
	}
}

// SetupDropped counts an IPMI session set-up pushed out or refused for
// room (why: "source", "evicted", "refused").
func (r *Registry) SetupDropped(why string) {
	if r != nil {
		r.setups.WithLabelValues(why).Inc()
	}
}

func hex(b uint8) string {
	const digits = "0123456789abcdef"
	return string([]byte{digits[b>>4], digits[b&15]}) + "h"
}
