package testenv

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// Port returns a port on host that is free for both TCP and UDP and stays
// reserved for this test, for a daemon the test starts with the port on its
// command line (kube-apiserver, etcd, Ironic, a BMC).
//
// Picking a port by listening on port 0 and closing it races: between the
// close and the daemon's bind, any other process that asks the kernel for
// an ephemeral port may be handed the same one (CI once lost kube-apiserver's
// port to a client socket this way). Port therefore picks below the
// kernel's ephemeral range (net.ipv4.ip_local_port_range), which the kernel
// never hands out on its own, and holds a lock file under the system's temp
// directory until the test ends, so that test processes running in
// parallel never pick the same port.
func Port(t testing.TB, host string) int {
	t.Helper()
	low := ephemeralLow()
	const first = 10000
	if low <= first+100 {
		t.Fatalf("testenv.Port: the ephemeral port range starts at %d; it must start above %d (sysctl net.ipv4.ip_local_port_range)", low, first+100)
	}
	dir := filepath.Join(os.TempDir(), "bmlab-ports")
	if err := os.MkdirAll(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	for range 200 {
		p := first + rand.IntN(low-first)
		f, err := os.OpenFile(filepath.Join(dir, strconv.Itoa(p)), os.O_CREATE|os.O_RDWR, 0o666)
		if err != nil {
			t.Fatal(err)
		}
		if syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) != nil {
			f.Close() // another test process holds it
			continue
		}
		if !bindable(host, p) {
			f.Close()
			continue
		}
		t.Cleanup(func() { f.Close() }) // closing the file releases the lock
		return p
	}
	t.Fatalf("testenv.Port: no free port on %s in %d-%d after 200 tries", host, first, low-1)
	return 0
}

// bindable reports whether TCP and UDP port p on host can be bound now.
func bindable(host string, p int) bool {
	addr := net.JoinHostPort(host, strconv.Itoa(p))
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return false
	}
	l.Close()
	c, err := net.ListenPacket("udp", addr)
	if err != nil {
		return false
	}
	c.Close()
	return true
}

// ephemeralLow returns the first port of the kernel's ephemeral range
// (32768, Linux's default, when it cannot be read).
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 32768
	}
	var lo, hi int
	if _, err := fmt.Sscan(strings.TrimSpace(string(b)), &lo, &hi); err != nil {
		return 32768
	}
	return lo
}
