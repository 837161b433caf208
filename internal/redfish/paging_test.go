package redfish

import (
	"fmt"
	"net/http"
	"testing"
)

// TestPaging: $skip and $top page the Systems collection; a collection
// longer than a page ends with Members@odata.nextLink, and following the
// links lists every member once, in order; the count is always the whole
// collection's.
func TestPaging(t *testing.T) {
	const n = 2*pageSize + 7
	f := newFixture(t, n)
	page := func(path string) (ids []string, next string) {
		t.Helper()
		w := f.do(req{path: path})
		if w.Code != http.StatusOK {
			t.Fatalf("GET %s: %d %s", path, w.Code, w.Body.String())
		}
		body := decode(t, w)
		if got := body["Members@odata.count"]; got != float64(n) {
			t.Errorf("GET %s: count %v, want %d", path, got, n)
		}
		for _, m := range body["Members"].([]any) {
			ids = append(ids, m.(map[string]any)["@odata.id"].(string))
		}
		next, _ = body["Members@odata.nextLink"].(string)
		return ids, next
	}
	var all []string
	for path, pages := systemsURI, 0; path != ""; pages++ {
		if pages > 3 {
			t.Fatalf("more than 3 pages for %d members", n)
		}
		var ids []string
		ids, path = page(path)
		if len(ids) > pageSize {
			t.Errorf("a page of %d members, want at most %d", len(ids), pageSize)
		}
		all = append(all, ids...)
	}
	if len(all) != n {
		t.Fatalf("following nextLink: %d members, want %d", len(all), n)
	}
	for i, id := range all {
		if id != f.sys(i) {
			t.Fatalf("member %d is %s, want %s", i, id, f.sys(i))
		}
	}
	for _, tc := range []struct {
		query     string
		first     int
		count     int
		wantsNext bool
	}{
		{"$top=3", 0, 3, false},
		{"$skip=5&$top=2", 5, 2, false},
		{fmt.Sprintf("$skip=%d", n-2), n - 2, 2, false},
		{fmt.Sprintf("$skip=%d", n+10), 0, 0, false},
		{"$top=0", 0, 0, false},
		{fmt.Sprintf("$top=%d", pageSize+1), 0, pageSize, true},
	} {
		ids, next := page(systemsURI + "?" + tc.query)
		if len(ids) != tc.count || (tc.count > 0 && ids[0] != f.sys(tc.first)) || (next != "") != tc.wantsNext {
			t.Errorf("?%s: %d members from %v, next %q; want %d from %d, next %v", tc.query, len(ids), ids[:min(1, len(ids))], next, tc.count, tc.first, tc.wantsNext)
		}
		if tc.wantsNext {
			if rest, next2 := page(next); len(rest) != 1 || next2 != "" {
				t.Errorf("?%s then %s: %d more members, next %q; want 1, none", tc.query, next, len(rest), next2)
			}
		}
	}
	for _, q := range []string{"$top=-1", "$skip=x", "$top=1&$top=2"} {
		w := f.do(req{path: systemsURI + "?" + q})
		if got := messageIDs(t, w); w.Code != http.StatusBadRequest || len(got) != 1 || got[0] != "QueryParameterValueTypeError" {
			t.Errorf("?%s: %d %v, want 400 QueryParameterValueTypeError", q, w.Code, got)
		}
	}
}
