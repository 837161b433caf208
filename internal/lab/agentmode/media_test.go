package agentmode

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bmlab/bmlab/internal/lab"
	"github.com/bmlab/bmlab/internal/lab/labtest"
	"github.com/bmlab/bmlab/internal/labconfig"
	"github.com/bmlab/bmlab/internal/pki"
	"github.com/bmlab/bmlab/internal/plan"
	"github.com/bmlab/bmlab/internal/plan/plantest"
)

// fakeBMCs answers, in Redfish's shape (what gofish reads), the calls the
// media step makes, for every system, and keeps each call that changes
// something ("POST node Insert", "PATCH node", "POST node Reset On"); an
// InsertMedia for a system in fail answers 500 once. It stands in for
// vbmcd to test the step's bookkeeping across ups; the client's calls
// against vbmcd itself are bmcclient's TestAgainstVbmcd.
type fakeBMCs struct {
	mu       sync.Mutex
	calls    []string
	inserted map[string]string // system → image
	power    map[string]string
	fail     map[string]bool
}

func (f *fakeBMCs) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	answer := func(v any) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(v)
	}
	if r.Method == http.MethodGet && strings.TrimSuffix(r.URL.Path, "/") == "/redfish/v1" {
		answer(map[string]any{"@odata.id": "/redfish/v1/", "Id": "RootService", "Systems": map[string]string{"@odata.id": "/redfish/v1/Systems"}})
		return
	}
	rest := strings.TrimPrefix(r.URL.Path, "/redfish/v1/Systems/")
	sys, sub, _ := strings.Cut(rest, "/")
	self := "/redfish/v1/Systems/" + sys
	action := func(name string) map[string]string { return map[string]string{"target": self + "/" + name} }
	switch {
	case r.Method == http.MethodGet && sub == "":
		answer(map[string]any{"@odata.id": self, "Id": sys, "UUID": sys, "PowerState": f.power[sys],
			"VirtualMedia": map[string]string{"@odata.id": self + "/VirtualMedia"},
			"Actions":      map[string]any{"#ComputerSystem.Reset": action("Actions/ComputerSystem.Reset")}})
	case r.Method == http.MethodGet && sub == "VirtualMedia":
		answer(map[string]any{"@odata.id": self + "/VirtualMedia", "Members": []map[string]string{{"@odata.id": self + "/VirtualMedia/Cd"}}, "Members@odata.count": 1})
	case r.Method == http.MethodGet && sub == "VirtualMedia/Cd":
		answer(map[string]any{"@odata.id": self + "/VirtualMedia/Cd", "Id": "Cd", "MediaTypes": []string{"CD", "DVD"}, "Image": f.inserted[sys], "Inserted": f.inserted[sys] != "",
			"Actions": map[string]any{
				"#VirtualMedia.InsertMedia": action("VirtualMedia/Cd/Actions/VirtualMedia.InsertMedia"),
				"#VirtualMedia.EjectMedia":  action("VirtualMedia/Cd/Actions/VirtualMedia.EjectMedia"),
			}})
	case r.Method == http.MethodPost && sub == "VirtualMedia/Cd/Actions/VirtualMedia.InsertMedia":
		f.calls = append(f.calls, "POST "+sys+" Insert")
		if f.fail[sys] {
			delete(f.fail, sys)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusInternalServerError)
			_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"message": "the image server does not answer"}})
			return
		}
		var body struct{ Image string }
		_ = json.NewDecoder(r.Body).Decode(&body)
		f.inserted[sys] = body.Image
		w.WriteHeader(http.StatusNoContent)
	case r.Method == http.MethodPatch && sub == "":
		f.calls = append(f.calls, "PATCH "+sys)
		w.WriteHeader(http.StatusNoContent)
	case r.Method == http.MethodPost && sub == "Actions/ComputerSystem.Reset":
		var body struct{ ResetType string }
		_ = json.NewDecoder(r.Body).Decode(&body)
		f.calls = append(f.calls, "POST "+sys+" Reset "+body.ResetType)
		f.power[sys] = "On"
		w.WriteHeader(http.StatusNoContent)
	default:
		http.NotFound(w, r)
	}
}

// took is the calls to a system.
func (f *fakeBMCs) took(sys string) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, c := range f.calls {
		if strings.Contains(c, " "+sys) {
			out = append(out, c)
		}
	}
	return out
}

// TestMediaAfterAPartialFailure: when one node's BMC fails to take the
// ISO, the next up boots that node and does not touch the ones that booted
// it already (no new InsertMedia, override or reset: they are installing);
// once all have booted, up sends nothing. A day-2 node is not the media
// step's.
func TestMediaAfterAPartialFailure(t *testing.T) {
	dir := t.TempDir()
	cfg, err := labconfig.Parse([]byte("name: am\ncluster: {workers: {count: 0}}\n"))
	labtest.Must(t, err)
	labtest.Must(t, cfg.ApplyProfile("tiny"))
	p, err := plan.Resolve(cfg, plan.Options{Modes: plantest.Modes(), Dir: dir, Profile: "tiny", Mode: Name, AddedWorkers: 1})
	labtest.Must(t, err)
	bmcs := &fakeBMCs{inserted: map[string]string{}, power: map[string]string{}, fail: map[string]bool{}}
	// The fake's certificate is issued by the lab's CA, which the client
	// verifies.
	ca, err := pki.EnsureCA(p.Paths.CACert, p.Paths.CAKey, "test lab CA", time.Now())
	labtest.Must(t, err)
	pair, err := ca.Issue([]string{"127.0.0.1"}, time.Now())
	labtest.Must(t, err)
	srv := httptest.NewUnstartedServer(bmcs)
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{pair}}
	srv.StartTLS()
	defer srv.Close()
	if !p.BMC.LabCA {
		t.Fatal("the plan has no lab CA: the test wants the client to verify one")
	}
	var systems []string
	for i, n := range p.Nodes {
		p.Nodes[i].BMC.SystemURL = srv.URL + "/redfish/v1/Systems/" + n.UUID
		systems = append(systems, n.UUID)
	}
	if len(systems) != 4 || !p.Nodes[3].Added {
		t.Fatalf("want 3 masters and a day-2 worker, got %v", p.NodeNames())
	}
	p.Agent.MediaAddr = "127.0.0.1:0" // served, never fetched: the fake attaches at once
	labtest.Must(t, os.MkdirAll(filepath.Dir(p.Paths.AgentISO), 0o755))
	labtest.Must(t, os.WriteFile(p.Paths.AgentISO, []byte("iso"), 0o644))
	labtest.Must(t, os.MkdirAll(p.StateDir, 0o755))
	e := &lab.Env{Plan: p, Host: labtest.NewHost(), Rep: &labtest.Recorder{}}
	ctx := context.Background()
	booted := []string{"POST %s Insert", "PATCH %s", "POST %s Reset On"}
	want := func(sys string) []string {
		var out []string
		for _, c := range booted {
			out = append(out, strings.Replace(c, "%s", sys, 1))
		}
		return out
	}

	bmcs.fail[systems[1]] = true
	if _, err := ensureMedia(ctx, e); err == nil || !strings.Contains(err.Error(), "node am-master-1") {
		t.Fatalf("the first up = %v, want master-1's failure", err)
	}
	if got := bmcs.took(systems[0]); !slices.Equal(got, want(systems[0])) {
		t.Fatalf("master-0 on the first up: %v", got)
	}

	bmcs.calls = nil
	changed, err := ensureMedia(ctx, e)
	labtest.Must(t, err)
	if !changed {
		t.Errorf("the second up booted master-1 and master-2 but says nothing changed")
	}
	if got := bmcs.took(systems[0]); len(got) != 0 {
		t.Errorf("the second up sent master-0, which booted the ISO already: %v", got)
	}
	for _, s := range systems[1:3] {
		if got := bmcs.took(s); !slices.Equal(got, want(s)) {
			t.Errorf("the second up sent %s %v, want %v", s, got, want(s))
		}
	}
	if got := bmcs.took(systems[3]); len(got) != 0 {
		t.Errorf("the media step booted the day-2 worker: %v", got)
	}

	bmcs.calls = nil
	if changed, err := ensureMedia(ctx, e); err != nil || changed || len(bmcs.calls) != 0 {
		t.Errorf("a third up = %v, %v, sent %v; want nothing", changed, err, bmcs.calls)
	}
}
