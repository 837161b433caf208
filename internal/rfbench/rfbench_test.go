package rfbench

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http/httptest"
	neturl "net/url"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/bmlab/bmlab/internal/testenv"
)

func TestReadResponse(t *testing.T) {
	stream := "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}" +
		"HTTP/1.1 204 No Content\r\n\r\n" +
		"HTTP/1.1 401 Unauthorized\r\ncontent-length: 5\r\n\r\nnope!"
	br := bufio.NewReader(strings.NewReader(stream))
	type got struct{ Status, N int }
	var all []got
	for range 3 {
		s, n, err := readResponse(br)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, got{s, n})
	}
	if diff := cmp.Diff([]got{{200, 2}, {204, 0}, {401, 5}}, all); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestServerCPUReadsProc(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc")
	}
	if _, err := serverCPU(os.Getpid()); err != nil {
		t.Fatal(err)
	}
}

func TestLoopbackOnly(t *testing.T) {
	for host, ok := range map[string]bool{"127.0.0.1": true, "::1": true, "localhost": true, "10.0.0.1": false, "example.com": false} {
		if err := loopbackOnly(host); (err == nil) != ok {
			t.Errorf("%s: %v", host, err)
		}
	}
}

// Run against a server it did not start: the in-process Redfish handler.
func TestRunAgainstAServer(t *testing.T) {
	url, stop := serveForTest(t)
	defer stop()
	var out bytes.Buffer
	err := Run(context.Background(), []string{"-url", url, "-c", "2", "-d", "300ms", "-warmup", "50ms",
		"-server-pid", itoa(os.Getpid())}, &out)
	if err != nil {
		t.Fatal(err)
	}
	t.Log(out.String())
	for _, want := range []string{"throughput", "p99", "ms/request", "(0 not 200)"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report lacks %q", want)
		}
	}
}

// The floor server answers every GET with exactly the bytes asked for, and
// rfbench loads it like any server; -floor-bytes refuses a -url.
func TestFloor(t *testing.T) {
	ts := httptest.NewServer(floorHandler(500))
	defer ts.Close()
	var out bytes.Buffer
	if err := Run(context.Background(), []string{"-url", ts.URL, "-path", "/anything", "-user", "", "-c", "2", "-d", "200ms", "-warmup", "20ms"}, &out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "(0 not 200), 500 bytes/response") {
		t.Errorf("report of the floor server:\n%s", out.String())
	}
	for _, args := range [][]string{{"-floor-bytes", "100", "-url", ts.URL}, {"-floor-bytes", "-1"}, {"-floor-bytes", "2000000"}} {
		if err := Run(context.Background(), args, &out); err == nil || !strings.Contains(err.Error(), "-floor-bytes") {
			t.Errorf("rfbench %v: %v, want an error about -floor-bytes", args, err)
		}
	}
}

// rawGet sends one GET on a connection of its own and returns the response
// as it came off the wire, its Date line taken out.
func rawGet(t *testing.T, url, path, auth string) string {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: x\r\n%sConnection: close\r\n\r\n", path, auth)
	raw, err := io.ReadAll(c)
	if err != nil {
		t.Fatal(err)
	}
	var keep []string
	for _, l := range strings.SplitAfter(string(raw), "\r\n") {
		if !strings.HasPrefix(l, "Date: ") {
			keep = append(keep, l)
		}
	}
	return strings.Join(keep, "")
}

// -floor-copy's server answers a saved response of the Redfish service
// byte for byte but for net/http's Date (status, headers in their order
// and case, body), and 401 to other credentials.
func TestFloorCopyIsByteIdentical(t *testing.T) {
	url, stop := serveForTest(t)
	defer stop()
	o := options{user: "admin", password: "password"}
	base, _ := neturl.Parse(url)
	sys, err := firstSystem(base, o)
	if err != nil {
		t.Fatal(err)
	}
	want := rawGet(t, url, sys, authHeader(o))
	if !strings.Contains(want, "Odata-Version: 4.0\r\n") || !strings.Contains(want, "Etag: ") {
		t.Fatalf("the Redfish answer lacks its headers:\n%s", want)
	}
	file := testenv.WriteFile(t, t.TempDir(), "resp", []byte(want))
	fc, err := readFloorCopy(file)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(fc.handler(authHeaderValue(o.user, o.password)))
	defer ts.Close()
	if diff := cmp.Diff(want, rawGet(t, ts.URL, "/floor", authHeader(o))); diff != "" {
		t.Errorf("the floor's answer differs from the service's (-service +floor):\n%s", diff)
	}
	bad := rawGet(t, ts.URL, "/floor", authHeader(options{user: "admin", password: "nope"}))
	if !strings.HasPrefix(bad, "HTTP/1.1 401 ") {
		t.Errorf("wrong password: %q, want a 401", bad)
	}
	var out bytes.Buffer
	if err := Run(context.Background(), []string{"-url", ts.URL, "-path", "/floor", "-c", "2", "-d", "200ms", "-warmup", "20ms"}, &out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "(0 not 200)") {
		t.Errorf("report of the floor-copy server:\n%s", out.String())
	}
	for _, args := range [][]string{{"-floor-copy", file, "-url", ts.URL}, {"-floor-copy", file, "-floor-bytes", "10"}, {"-floor-copy", file + ".none"}} {
		if err := Run(context.Background(), args, &out); err == nil || !strings.Contains(err.Error(), "-floor-copy") {
			t.Errorf("rfbench %v: %v, want an error about -floor-copy", args, err)
		}
	}
}
