package redfish

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// The render cache keeps at most two generations of limit bytes, keeps
// what is read often across generations, and never serves a body of an
// older Generation.
func TestRenderCacheBounded(t *testing.T) {
	var c renderCache
	c.init(10_000)
	body := []byte(strings.Repeat("x", 744)) // cost 744 + key + 256 ≈ 1 KB
	hot := "/redfish/v1/Systems/hot"
	c.put(hot, newEntry(7, body, hdrJSON))
	for i := range 1000 {
		c.put(fmt.Sprintf("/redfish/v1/Systems/%04d", i), newEntry(1, body, hdrJSON))
		if c.get(hot, 7) == nil {
			t.Fatalf("after %d other puts, the entry read after each of them is gone", i+1)
		}
		if _, b := c.size(); b > 2*c.limit+2048 {
			t.Fatalf("after %d puts the cache holds %d bytes, limit 2×%d", i+1, b, c.limit)
		}
	}
	if c.get("/redfish/v1/Systems/0000", 1) != nil {
		t.Errorf("the first of 1,000 entries read once is still kept")
	}
	if c.get("/redfish/v1/Systems/0999", 1) == nil {
		t.Errorf("the last entry put is not kept")
	}
	if c.get(hot, 8) != nil {
		t.Errorf("an entry of Generation 7 served for Generation 8")
	}
	n, b := c.size()
	t.Logf("after 1,001 entries of ~1 KB with a 10 KB limit: %d entries, %d bytes", n, b)
}

// Reading every system of a big fleet once leaves the cache within its
// bound, and every answer is that system's own.
func TestRenderCacheScan(t *testing.T) {
	f := newFixture(t, 3000)
	f.srv.cache.init(64 << 10)
	for _, id := range f.ids {
		w := f.do(req{path: systemsURI + "/" + id})
		if w.Code != http.StatusOK || !strings.Contains(w.Body.String(), `"Id":"`+id+`"`) {
			t.Fatalf("GET system %s: %d %.200s", id, w.Code, w.Body.String())
		}
	}
	n, b := f.srv.cache.size()
	if b > 2*(64<<10)+8192 {
		t.Errorf("after reading 3,000 systems the cache holds %d bytes in %d entries, bound 2×64 KiB", b, n)
	}
	// A system read again after aging out is rendered afresh, correctly.
	w := f.do(req{path: systemsURI + "/" + f.ids[0]})
	if w.Code != http.StatusOK || !strings.Contains(w.Body.String(), `"Id":"`+f.ids[0]+`"`) {
		t.Errorf("GET of an aged-out system: %d %.200s", w.Code, w.Body.String())
	}
}
