package vbmcd

import (
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/zap"

	"github.com/bmlab/bmlab/internal/machine"
	"github.com/bmlab/bmlab/internal/sim"
)

// TestAdminAnswers: the admin socket's changes (faults, personalities)
// answer a body that is not one with 400 saying what it wanted, an unknown
// machine with 404, a refused value with 400 and its reason, and a change
// with 200.
func TestAdminAnswers(t *testing.T) {
	svc := machine.NewService(sim.New(1), zap.NewNop())
	id := svc.List()[0].ID
	h := adminHandler(svc)
	for _, tc := range []struct {
		name, method, path, body string
		code                     int
		says                     string
	}{
		{"fault: not JSON", "PUT", "/faults/" + id, "{", 400, "not a fault: "},
		{"fault: an unknown field", "PUT", "/faults/" + id, `{"nope":1}`, 400, "not a fault: "},
		{"fault: no such machine", "PUT", "/faults/no-such", `{}`, 404, "no machine no-such"},
		{"fault: a bad value", "PUT", "/faults/" + id, `{"latency":"soon"}`, 400, "latency"},
		{"fault: set", "PUT", "/faults/" + id, `{"ipmiDrop":1}`, 200, id},
		{"fault: clear, no such machine", "DELETE", "/faults/no-such", "", 404, "no machine no-such"},
		{"personality: an unknown field", "PUT", "/personalities/" + id, `{"nope":1}`, 400, "not a personality: "},
		{"personality: no such machine", "PUT", "/personalities/no-such", `{"personality":"ilo6"}`, 404, "no machine no-such"},
		{"personality: an unknown one", "PUT", "/personalities/" + id, `{"personality":"idrac7"}`, 400, "idrac7"},
		{"personality: set", "PUT", "/personalities/" + id, `{"personality":"ilo6"}`, 200, "ilo6"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(tc.method, tc.path, strings.NewReader(tc.body)))
			if diff := cmp.Diff(tc.code, rec.Code); diff != "" {
				t.Errorf("status (-want +got):\n%s\nbody %s", diff, rec.Body)
			}
			if !strings.Contains(rec.Body.String(), tc.says) {
				t.Errorf("body %s, want it to say %q", rec.Body, tc.says)
			}
			if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type %q", ct)
			}
		})
	}
}
