package media

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/bmlab/bmlab/internal/machine"
)

// TestFetchFromTheBMCsAddress: with a Source, the image is fetched from
// that address (the server sees it as the client's), every time (a copy
// in the cache is revalidated from there too); without one, from the
// host's. A fetch its network does not route ends as the BMC's own error
// would: unreachable, no route, from its address.
func TestFetchFromTheBMCsAddress(t *testing.T) {
	body := fakeISO(40100, "src")
	var mu sync.Mutex
	var from []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host, _, _ := net.SplitHostPort(r.RemoteAddr)
		mu.Lock()
		from = append(from, r.Method+" "+host)
		mu.Unlock()
		w.Header().Set("ETag", `"v1"`)
		if r.Header.Get("If-None-Match") == `"v1"` {
			w.WriteHeader(http.StatusNotModified)
			return
		}
		w.Write(body)
	}))
	defer srv.Close()
	c := newCache(t, Config{})
	src := netip.MustParseAddr("127.0.0.5")
	for range 2 {
		if _, err := fetch(t, c, machine.ImageRequest{Image: srv.URL + "/a.iso", ISO: true, Source: src}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := fetch(t, c, machine.ImageRequest{Image: srv.URL + "/a.iso", ISO: true}); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	got := strings.Join(from, ", ")
	mu.Unlock()
	if want := "GET 127.0.0.5, GET 127.0.0.5, GET 127.0.0.1"; got != want {
		t.Errorf("requests %s, want %s", got, want)
	}

	// No route from the BMC's network: the transport's error, as the
	// kernel gives it (connect: network is unreachable).
	opErr := &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ENETUNREACH)}
	err := c.classify("http://172.22.0.2:6180/agent.iso", fmt.Errorf("Get: %w", opErr), nil)
	me, ok := machine.IsMediaError(err)
	if !ok || me.Kind != machine.MediaUnreachable || !errors.Is(err, errNoRoute) {
		t.Fatalf("classify(ENETUNREACH) = %v", err)
	}
}
