package admission

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// What the gate adds to an HTTP/1 GET on a connection of its own (NewConn,
// as vbmcd's front serves them): admission, the write deadline kept for
// the sweeper, the renewal after the handler, the places given back.
func BenchmarkWrapHTTP1(b *testing.B) {
	g := New(Budgets{PerSource: 64, Total: 2048, AnonPerSource: 16, AnonTotal: 1024,
		AnonRead: 5 * time.Second, Read: 30 * time.Second, Write: 60 * time.Second,
		BodyPerSource: 16 << 20, BodyTotal: 64 << 20, RetryAfter: time.Second}, nil, nil)
	c, peer := net.Pipe()
	defer c.Close()
	defer peer.Close()
	ctx, gc := g.NewConn(context.Background(), c)
	defer gc.State(http.StateClosed)
	h := g.Wrap(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	r := httptest.NewRequest(http.MethodGet, "/redfish/v1/Systems/x", nil).WithContext(ctx)
	r.Header.Set("Authorization", "Basic YWRtaW46cGFzc3dvcmQ=")
	r.Body = http.NoBody
	w := httptest.NewRecorder()
	b.ReportAllocs()
	for range b.N {
		h.ServeHTTP(w, r)
		gc.State(http.StateIdle)
	}
}
