package vbmcd

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bmlab/bmlab/internal/ironictest"
	"github.com/bmlab/bmlab/internal/sim"
	"github.com/bmlab/bmlab/internal/testenv"
	"github.com/bmlab/bmlab/internal/virttest"
)

// countingServer serves one file and counts the bytes of its bodies and
// its requests by method.
type countingServer struct {
	URL      string
	bytes    atomic.Int64
	mu       sync.Mutex
	requests map[string]int
}

func serveCounting(t *testing.T, path string) *countingServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cs := &countingServer{URL: "http://" + ln.Addr().String() + "/ipa.iso", requests: map[string]int{}}
	srv := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		cs.mu.Lock()
		cs.requests[r.Method]++
		cs.mu.Unlock()
		http.ServeFile(countingWriter{w, &cs.bytes}, r, path)
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { srv.Close() })
	return cs
}

type countingWriter struct {
	http.ResponseWriter
	n *atomic.Int64
}

func (w countingWriter) Write(b []byte) (int, error) {
	n, err := w.ResponseWriter.Write(b)
	w.n.Add(int64(n))
	return n, err
}

// TestVirtualMediaOneFetchForMany: 100 simulated machines, each told at
// once to insert the same ISO (the deploy ramdisk's, 105 MB, as Ironic's
// virtual media hands one image to many nodes), take it from the image
// server once: the bytes served are the ISO's once (within 10 %), the
// other machines' fetches are answered from vbmcd's cache after the server
// says the file is unchanged (HEAD). Every machine reads Inserted; the test
// logs how long that took.
func TestVirtualMediaOneFetchForMany(t *testing.T) {
	testenv.Integration(t)
	iso := ironictest.DeployRamdisk(t).ISO
	st, err := os.Stat(iso)
	if err != nil {
		t.Fatal(err)
	}
	const n = 100
	img := serveCounting(t, iso)
	addr, _ := simDaemon(t, func(c *Config) {
		c.SimNodes, c.SimMedia = n, string(sim.MediaFetch)
		c.MediaAllowLoopback = true
		c.MediaMaxBytes = 4 * st.Size()
	})
	var ids []string
	for i := 1; i <= n; i++ {
		ids = append(ids, sim.UUIDFor(fmt.Sprintf("sim-%04d", i)))
	}
	insertEverywhere(t, "http://"+addr, "admin", "sim-pass-1", ids, img, st.Size())
}

// TestVirtualMediaOneFetchForThreeVMs: three libvirt VMs (powered off, as
// Ironic has them when it inserts its ISO), told at once to insert the
// same ISO (the deploy ramdisk's), take it from the image server once: the
// bytes served are the ISO's once (within 10 %), and each domain's CD then
// holds it (Inserted, as libvirt's XML says through vbmcd). The test logs
// how long that took.
func TestVirtualMediaOneFetchForThreeVMs(t *testing.T) {
	const prefix = "e2e-vmshared-"
	lab := virttest.New(t, prefix)
	iso := ironictest.DeployRamdisk(t).ISO
	st, err := os.Stat(iso)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, name := range []string{"a", "b", "c"} {
		ids = append(ids, lab.NewVM(t, name, virttest.VMOptions{NoCD: true}).ID)
	}
	img := serveCounting(t, iso)
	url := daemon(t, prefix)
	insertEverywhere(t, url, "admin", "e2e-pass", ids, img, st.Size())
}

// insertEverywhere has the Redfish service at base insert img (size bytes)
// into the Cd of every manager in ids at once, waits until each reads
// Inserted, logs how long that took, and checks that the image server sent
// the image once (within 10 %).
func insertEverywhere(t *testing.T, base, user, pass string, ids []string, img *countingServer, size int64) {
	t.Helper()
	managers := base + "/redfish/v1/Managers/"
	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, len(ids))
	for _, id := range ids {
		wg.Add(1)
		go func(id string) {
			defer wg.Done()
			r, err := send("POST", managers+id+"/VirtualMedia/Cd/Actions/VirtualMedia.InsertMedia", user, pass, `{"Image":"`+img.URL+`"}`)
			if err == nil && r.Code >= 300 {
				err = fmt.Errorf("InsertMedia on %s: %d %s", id, r.Code, r.Body)
			}
			if err != nil {
				errs <- err
			}
		}(id)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	inserted := func(id string) bool {
		r, err := send("GET", managers+id+"/VirtualMedia/Cd", user, pass, "")
		return err == nil && r.object()["Inserted"] == true
	}
	for i, id := range ids {
		if !testenv.WaitFor(5*time.Minute, func() bool { return inserted(id) }) {
			t.Fatalf("machine %d (%s): the ISO not Inserted after 5 min", i+1, id)
		}
	}
	took := time.Since(start)
	img.mu.Lock()
	reqs := fmt.Sprint(img.requests)
	img.mu.Unlock()
	served := img.bytes.Load()
	t.Logf("%d machines inserted one %d-byte ISO in %s; the image server sent %d bytes (%.2fx the ISO) in %s requests",
		len(ids), size, took.Round(10*time.Millisecond), served, float64(served)/float64(size), reqs)
	if served < size || float64(served) > 1.1*float64(size) {
		t.Errorf("the image server sent %d bytes for %d machines inserting one %d-byte ISO, want it once (%s)", served, len(ids), size, reqs)
	}
}
