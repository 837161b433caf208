package redfish

import (
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/bmlab/bmlab/internal/machine"
	"github.com/bmlab/bmlab/internal/metrics"
)

// A request's duration in the metrics is the time it took: a GET of a
// machine whose requests are delayed 150 ms (vbmcd fault --latency) counts
// 150 ms or more, and not some other clock's reading (ServeHTTP times a
// request on the monotonic clock alone).
func TestRequestDurationObserved(t *testing.T) {
	reg := metrics.New()
	f := newFixture(t, 1, WithMetrics(reg))
	const delay = 150 * time.Millisecond
	if _, err := f.svc.SetFault(f.ids[0], machine.Fault{Latency: delay}); err != nil {
		t.Fatal(err)
	}
	if w := f.do(req{path: "/redfish/v1/Systems/" + f.ids[0]}); w.Code != http.StatusOK {
		t.Fatalf("GET the System: %d %s", w.Code, w.Body)
	}
	w := httptest.NewRecorder()
	reg.Handler().ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	m := regexp.MustCompile(`(?m)^vbmcd_redfish_request_duration_seconds_sum\{method="GET",route="/redfish/v1/Systems/\*"\} (\S+)$`).FindStringSubmatch(w.Body.String())
	if m == nil {
		t.Fatalf("no duration of the GET in the metrics:\n%s", w.Body)
	}
	took, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		t.Fatal(err)
	}
	if took < delay.Seconds() || took > 10 {
		t.Errorf("the GET took %v s by the metrics, want at least %v and well under 10 s", took, delay.Seconds())
	}
}
