package redfish

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/bmlab/bmlab/internal/machine"
	"github.com/bmlab/bmlab/internal/metrics"
)

// discard is a ResponseWriter that keeps nothing, so a benchmark measures the
// service and not a recorder.
type discard struct{ h http.Header }

func (d *discard) Header() http.Header         { return d.h }
func (d *discard) Write(b []byte) (int, error) { return len(b), nil }
func (d *discard) WriteHeader(int)             {}

func benchGet(b *testing.B, n int, path func(f *fixture) string, opts ...Option) {
	benchGetOn(b, n, path, false, opts...)
}

// benchGetOn is benchGet, on the system's own BMC (AtBMC) when own.
func benchGetOn(b *testing.B, n int, path func(f *fixture) string, own bool, opts ...Option) {
	f := newFixture(b, n, opts...)
	benchServe(b, f, path(f), own)
}

// benchServe times f's handler answering one GET of path, at machine 0's
// own BMC when own, after a first GET has filled the caches.
func benchServe(b *testing.B, f *fixture, path string, own bool) {
	r := httptest.NewRequest("GET", path, nil)
	if own {
		r = r.WithContext(AtBMC(r.Context(), f.ids[0]))
	}
	r.SetBasicAuth(testUser, testPass)
	serveLoop(b, f.h, r)
}

// serveLoop times h serving r (a GET), once served untimed to fill the
// caches, its answer discarded.
func serveLoop(b *testing.B, h http.Handler, r *http.Request) {
	w := &discard{h: http.Header{}}
	h.ServeHTTP(w, r) // fill the caches
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		clear(w.h)
		h.ServeHTTP(w, r)
	}
}

func BenchmarkGetSystem(b *testing.B) {
	benchGet(b, 10, func(f *fixture) string { return f.sys(0) })
}

// BenchmarkGetSystemAtBMC is BenchmarkGetSystem on the system's own BMC
// (vbmcd --bmc-addresses): what the view of one system costs a GET.
func BenchmarkGetSystemAtBMC(b *testing.B) {
	benchGetOn(b, 10, func(f *fixture) string { return f.sys(0) }, true)
}

// BenchmarkGetSystemMetrics is BenchmarkGetSystem with the Prometheus
// counters and latency histogram vbmcd turns on.
func BenchmarkGetSystemMetrics(b *testing.B) {
	benchGet(b, 10, func(f *fixture) string { return f.sys(0) }, WithMetrics(metrics.New()))
}

func BenchmarkGetSystems1000(b *testing.B) {
	benchGet(b, 1000, func(*fixture) string { return systemsURI })
}

// A GET of a cached resource allocates next to nothing beyond what net/http
// itself does, and the 1,000-system collection is served well within 5 ms.
func TestHotPathCost(t *testing.T) {
	f := newFixture(t, 1000)
	r := httptest.NewRequest("GET", f.sys(0), nil)
	r.SetBasicAuth(testUser, testPass)
	w := &discard{h: http.Header{}}
	f.h.ServeHTTP(w, r)
	allocs := testing.AllocsPerRun(200, func() {
		clear(w.h)
		f.h.ServeHTTP(w, r)
	})
	if allocs > 2 {
		t.Errorf("GET of a cached system: %.1f allocations, want at most 2", allocs)
	}
	rc := httptest.NewRequest("GET", systemsURI, nil)
	rc.SetBasicAuth(testUser, testPass)
	best := time.Hour
	for range 20 {
		start := time.Now()
		f.h.ServeHTTP(&discard{h: http.Header{}}, rc)
		best = min(best, time.Since(start))
	}
	if best > 5*time.Millisecond {
		t.Errorf("GET of a 1,000-system collection: best of 20 took %v, want under 5ms", best)
	}
	t.Logf("cached system GET: %.1f allocs; 1,000-system collection: %v", allocs, best)
}

// BenchmarkBIOSFlow is the BMC's share of Ironic's BIOS apply_configuration
// on a simulated machine that is on: read the registry and the current
// settings, stage two changes, ForceRestart, read the settings back. The
// VM's own reboot is not in it.
func BenchmarkBIOSFlow(b *testing.B) {
	f := newFixture(b, 10)
	do := func(method, path, body string, want int) {
		w := f.do(req{method: method, path: path, body: body})
		if w.Code != want {
			b.Fatalf("%s %s: %d %s", method, path, w.Code, w.Body.String())
		}
	}
	do("POST", f.sys(0)+"/Actions/ComputerSystem.Reset", `{"ResetType": "On"}`, http.StatusNoContent)
	turbo := []string{"Disabled", "Enabled"}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		do("GET", biosRegistryURI, "", http.StatusOK)
		do("GET", f.sys(0)+"/Bios", "", http.StatusOK)
		do("PATCH", f.sys(0)+"/Bios/Settings", `{"Attributes": {"ProcTurboMode": "`+turbo[i%2]+`", "PxeRetryCount": 5}}`, http.StatusOK)
		do("POST", f.sys(0)+"/Actions/ComputerSystem.Reset", `{"ResetType": "ForceRestart"}`, http.StatusNoContent)
		do("GET", f.sys(0)+"/Bios", "", http.StatusOK)
		i++
	}
}

// benchVendorBMC is a GET at machine 0's own BMC with the idrac9
// personality, by the vendor's path: what the ids' mapping costs (a cached
// resource is mapped once; the Manager, rendered per request, is mapped
// per request).
func benchVendorBMC(b *testing.B, path string) {
	f := newFixture(b, 10)
	if _, err := f.svc.UpdateSettings(context.Background(), f.ids[0], func(s *machine.Settings) error {
		s.Personality = "idrac9"
		return nil
	}); err != nil {
		b.Fatal(err)
	}
	benchServe(b, f, path, true)
}

func BenchmarkGetSystemAtVendorBMC(b *testing.B) {
	benchVendorBMC(b, "/redfish/v1/Systems/System.Embedded.1")
}

func BenchmarkGetManagerAtBMC(b *testing.B) {
	benchGetOn(b, 10, func(f *fixture) string { return managerURI(f.ids[0]) }, true)
}

func BenchmarkGetManagerAtVendorBMC(b *testing.B) {
	benchVendorBMC(b, "/redfish/v1/Managers/iDRAC.Embedded.1")
}
