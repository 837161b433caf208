package vbmcd

import (
	"context"
	"net/http"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// TestMetrics: after Redfish reads, a power action, a refused login and an
// ipmitool command, the /metrics listener shows each of them with the
// labels a dashboard would use, in Prometheus' text format.
func TestMetrics(t *testing.T) {
	ipmi := newIPMITool(t, "sim-pass-1")
	addr, out := simDaemon(t, func(c *Config) {
		c.MetricsAddr = "127.0.0.1:0"
		ipmi.ipmiOn(c)
	})
	metrics := metricsURL(t, out)
	base := "http://" + addr + "/redfish/v1"
	do := func(method, path, user, pass, body string) int {
		t.Helper()
		r, err := send(method, base+path, user, pass, body)
		if err != nil {
			t.Fatal(err)
		}
		return r.Code
	}
	sys := firstSimSystem(t, addr)
	for range 3 {
		if c := do("GET", "/Systems/"+sys, "admin", "sim-pass-1", ""); c != 200 {
			t.Fatalf("GET system: %d", c)
		}
	}
	if c := do("POST", "/Systems/"+sys+"/Actions/ComputerSystem.Reset", "admin", "sim-pass-1", `{"ResetType": "On"}`); c != 204 {
		t.Fatalf("Reset On: %d", c)
	}
	if c := do("GET", "/Systems/"+sys, "admin", "wrong", ""); c != 401 {
		t.Fatalf("wrong password: %d", c)
	}
	ipmi.must(t, "chassis", "status")

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", metrics, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("/metrics is not Prometheus text: %v", err)
	}
	value := func(name string, labels map[string]string) float64 {
		t.Helper()
		f := families[name]
		if f == nil {
			t.Errorf("no metric %s", name)
			return -1
		}
	next:
		for _, mt := range f.Metric {
			have := map[string]string{}
			for _, l := range mt.Label {
				have[l.GetName()] = l.GetValue()
			}
			for k, v := range labels {
				if have[k] != v {
					continue next
				}
			}
			return metricValue(mt)
		}
		t.Errorf("no %s%v among %d series", name, labels, len(f.Metric))
		return -1
	}
	for _, c := range []struct {
		name   string
		labels map[string]string
		min    float64
	}{
		{"vbmcd_redfish_requests_total", map[string]string{"route": "/redfish/v1/Systems/*", "method": "GET", "code": "200"}, 3},
		{"vbmcd_redfish_requests_total", map[string]string{"route": "/redfish/v1/Systems/*/Actions/ComputerSystem.Reset", "method": "POST", "code": "204"}, 1},
		{"vbmcd_redfish_requests_total", map[string]string{"route": "/redfish/v1/Systems/*", "method": "GET", "code": "401"}, 1},
		{"vbmcd_redfish_request_duration_seconds", map[string]string{"route": "/redfish/v1/Systems/*", "method": "GET"}, 3},
		{"vbmcd_power_actions_total", map[string]string{"type": "On", "result": "ok"}, 1},
		{"vbmcd_login_failures_total", map[string]string{"face": "redfish"}, 1},
		{"vbmcd_ipmi_requests_total", map[string]string{"command": "00h/01h", "code": "00h"}, 1},
		{"vbmcd_machines", nil, 2},
		{"vbmcd_media_cache_bytes", nil, 0},
		{"vbmcd_redfish_sessions", nil, 0},
		{"vbmcd_redfish_render_cache_bytes", nil, 1}, // the GETs above were kept
		{"vbmcd_ipmi_sessions", nil, 0},
	} {
		if v := value(c.name, c.labels); v < c.min {
			t.Errorf("%s%v = %v, want at least %v", c.name, c.labels, v, c.min)
		}
	}
}

// metricValue is a series' value: a counter's or gauge's, or a
// histogram's sample count.
func metricValue(m *dto.Metric) float64 {
	switch {
	case m.Counter != nil:
		return m.Counter.GetValue()
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	case m.Histogram != nil:
		return float64(m.Histogram.GetSampleCount())
	}
	return -1
}
