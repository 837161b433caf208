package virttest

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/bmlab/bmlab/internal/testenv"
)

// Underlay is a libvirt "host" of its own on this machine: a system-mode
// libvirtd in a network namespace the test made, with a mount namespace
// whose /run/libvirt, /etc/libvirt, /var/lib/libvirt, /var/cache/libvirt and
// /var/log/libvirt are the test's own directories, so it shares nothing with
// the system libvirtd. It listens on TCP (no authentication) on Addr. The
// underlays of one test share an underlay segment: a bridge in a namespace
// of its own that every underlay and the root namespace (PeerAddr) join by
// veths, so the hosts reach each other and the test reaches them, with no
// forwarding anywhere. Its VMs run in its namespace. Everything goes in
// t.Cleanup.
type Underlay struct {
	Name     string
	Netns    string
	Addr     string // the host's underlay address, in Netns
	PeerAddr string // the root namespace's end of the veth
	URI      string // qemu+tcp://Addr/system

	dir     string
	private []string // paths this host has a directory of its own at
	veth    string   // its port on the segment's bridge
	swNS    string
	cmd     *exec.Cmd
	done    chan struct{}
	log     *os.File
}

// segment is the underlay network of one test: 10.253.X.0/24, the root
// namespace at .1, underlay i at .i+2.
type segment struct {
	ns, rootLink string
	x            int
}

var (
	segMu    sync.Mutex
	segments = map[testing.TB]*segment{}
	segSeq   atomic.Int32
)

func run(t testing.TB, args ...string) {
	t.Helper()
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		t.Fatalf("ip %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// segmentOf returns the test's underlay segment, made on first use.
func segmentOf(t testing.TB) *segment {
	segMu.Lock()
	defer segMu.Unlock()
	if s, ok := segments[t]; ok {
		return s
	}
	// X from the process id and a sequence: parallel test binaries (other
	// packages, other engineers) and successive benchmarks pick different
	// subnets.
	seq := int(segSeq.Add(1))
	tag := fmt.Sprintf("%d%d", os.Getpid()%100000, seq%10)
	s := &segment{ns: "ulsw" + tag, rootLink: "ulr" + tag, x: (os.Getpid()+seq)%250 + 1}
	run(t, "netns", "add", s.ns)
	t.Cleanup(func() {
		segMu.Lock()
		delete(segments, t)
		segMu.Unlock()
		_ = exec.Command("ip", "link", "del", s.rootLink).Run()
		if out, err := exec.Command("ip", "netns", "del", s.ns).CombinedOutput(); err != nil {
			t.Errorf("underlay segment: ip netns del %s: %v\n%s", s.ns, err, out)
		}
	})
	run(t, "-n", s.ns, "link", "add", "sw", "type", "bridge")
	run(t, "-n", s.ns, "link", "set", "sw", "up")
	run(t, "link", "add", s.rootLink, "type", "veth", "peer", "name", "root", "netns", s.ns)
	run(t, "-n", s.ns, "link", "set", "root", "master", "sw", "up")
	run(t, "addr", "add", fmt.Sprintf("10.253.%d.1/24", s.x), "dev", s.rootLink)
	run(t, "link", "set", s.rootLink, "up")
	segments[t] = s
	return s
}

// NewUnderlay starts a host named name; index (0..200) picks its address
// on the test's underlay segment. At each private path (which must exist)
// the host has an empty directory of its own, in its libvirtd's mount
// namespace, as another machine would: what it puts there is not seen at
// that path here, nor the reverse. Exec enters that namespace.
func NewUnderlay(t testing.TB, name string, index int, private ...string) *Underlay {
	t.Helper()
	testenv.Root(t)
	for _, c := range []string{"ip", "unshare", "libvirtd", "qemu-system-x86_64"} {
		testenv.Command(t, c)
	}
	seg := segmentOf(t)
	tag := fmt.Sprintf("%s%d", strings.TrimPrefix(seg.ns, "ulsw"), index)
	u := &Underlay{
		Name:     name,
		Netns:    "ul" + tag,
		veth:     fmt.Sprintf("p%d", index),
		PeerAddr: fmt.Sprintf("10.253.%d.1", seg.x),
		Addr:     fmt.Sprintf("10.253.%d.%d", seg.x, index+2),
		dir:      t.TempDir(),
		swNS:     seg.ns,
		private:  private,
	}
	u.URI = "qemu+tcp://" + u.Addr + "/system"
	run(t, "netns", "add", u.Netns)
	t.Cleanup(func() { u.teardown(t) })
	run(t, "-n", u.Netns, "link", "set", "lo", "up")
	run(t, "-n", seg.ns, "link", "add", u.veth, "type", "veth", "peer", "name", "underlay", "netns", u.Netns)
	run(t, "-n", seg.ns, "link", "set", u.veth, "master", "sw", "up")
	run(t, "-n", u.Netns, "addr", "add", u.Addr+"/24", "dev", "underlay")
	run(t, "-n", u.Netns, "link", "set", "underlay", "up")

	dirs := []string{"run", "etc", "lib", "cache", "log"}
	for i := range private {
		dirs = append(dirs, fmt.Sprintf("private%d", i))
	}
	for _, d := range dirs {
		if err := os.MkdirAll(filepath.Join(u.dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write := func(name, text string) {
		if err := os.WriteFile(filepath.Join(u.dir, "etc", name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("libvirtd.conf", fmt.Sprintf("listen_tls = 0\nlisten_tcp = 1\nlisten_addr = %q\nauth_tcp = \"none\"\n", u.Addr))
	// No virtlogd in this mount namespace (its socket is the system's), and
	// no security driver: the test's files are plain root-owned ones.
	write("qemu.conf", "stdio_handler = \"file\"\nsecurity_driver = \"none\"\n")
	u.Start(t)
	return u
}

// Start starts the host's libvirtd and waits until its TCP port answers.
func (u *Underlay) Start(t testing.TB) {
	t.Helper()
	if u.cmd != nil {
		t.Fatalf("underlay %s: libvirtd is already running", u.Name)
	}
	mounts := ""
	for _, m := range [][2]string{{"run", "/run/libvirt"}, {"etc", "/etc/libvirt"}, {"lib", "/var/lib/libvirt"}, {"cache", "/var/cache/libvirt"}, {"log", "/var/log/libvirt"}} {
		mounts += fmt.Sprintf("mount --bind %s %s && ", filepath.Join(u.dir, m[0]), m[1])
	}
	for i, p := range u.private {
		src := filepath.Join(u.dir, fmt.Sprintf("private%d", i))
		if err := os.Chmod(src, 0o755); err != nil {
			t.Fatal(err)
		}
		mounts += fmt.Sprintf("mount --bind %s %s && ", src, p)
	}
	log, err := os.OpenFile(filepath.Join(u.dir, "libvirtd.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	// The pid is libvirtd's: ip netns exec, unshare and sh each exec the next.
	cmd := exec.Command("ip", "netns", "exec", u.Netns, "unshare", "--mount", "--propagation", "private",
		"sh", "-c", mounts+"exec libvirtd --listen --pid-file "+filepath.Join(u.dir, "libvirtd.pid"))
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		log.Close()
		t.Fatalf("start libvirtd of %s: %v", u.Name, err)
	}
	u.cmd, u.log, u.done = cmd, log, make(chan struct{})
	go func(done chan struct{}) { _ = cmd.Wait(); close(done) }(u.done)
	if !testenv.WaitFor(15*time.Second, u.Answers) {
		b, _ := os.ReadFile(log.Name())
		t.Fatalf("libvirtd of %s does not listen on %s:16509 within 15 s; its log:\n%s", u.Name, u.Addr, b)
	}
}

// Exec is the argv prefix that runs a command on this host: in its
// network namespace and its libvirtd's mount namespace (its private
// directories), as `ssh root@host` would on a real one.
func (u *Underlay) Exec() []string {
	return []string{"nsenter", "--target", fmt.Sprint(u.cmd.Process.Pid), "--mount", "--net", "--"}
}

// Answers reports whether the host's libvirtd accepts TCP connections.
func (u *Underlay) Answers() bool {
	c, err := net.DialTimeout("tcp", net.JoinHostPort(u.Addr, "16509"), 200*time.Millisecond)
	if err != nil {
		return false
	}
	c.Close()
	return true
}

// Kill kills the host's libvirtd (SIGKILL, as a crash would) and waits
// until it is gone. Its VMs keep running, as on a real host.
func (u *Underlay) Kill(t testing.TB) {
	t.Helper()
	if u.cmd == nil {
		return
	}
	_ = u.cmd.Process.Signal(syscall.SIGKILL)
	select {
	case <-u.done:
	case <-time.After(10 * time.Second):
		t.Fatalf("libvirtd of %s did not die within 10 s of SIGKILL", u.Name)
	}
	u.log.Close()
	u.cmd = nil
}

// teardown kills libvirtd and whatever else runs in the namespace (qemu),
// then removes the namespace and the veth.
func (u *Underlay) teardown(t testing.TB) {
	if u.cmd != nil {
		select {
		case <-u.done:
			t.Errorf("underlay %s: libvirtd died on its own during the test", u.Name)
		default:
		}
	}
	if t.Failed() {
		if b, err := os.ReadFile(filepath.Join(u.dir, "libvirtd.log")); err == nil {
			lines := strings.Split(strings.TrimSpace(string(b)), "\n")
			t.Logf("underlay %s: the end of libvirtd's log:\n%s", u.Name, strings.Join(lines[max(0, len(lines)-30):], "\n"))
		}
	}
	u.Kill(t)
	if out, err := exec.Command("ip", "netns", "pids", u.Netns).Output(); err == nil {
		for _, f := range strings.Fields(string(out)) {
			var pid int
			if _, err := fmt.Sscan(f, &pid); err == nil && pid > 1 {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
		testenv.WaitFor(10*time.Second, func() bool {
			out, err := exec.Command("ip", "netns", "pids", u.Netns).Output()
			return err != nil || strings.TrimSpace(string(out)) == ""
		})
	}
	_ = exec.Command("ip", "-n", u.swNS, "link", "del", u.veth).Run()
	if out, err := exec.Command("ip", "netns", "del", u.Netns).CombinedOutput(); err != nil {
		t.Errorf("underlay %s: ip netns del %s: %v\n%s", u.Name, u.Netns, err, out)
	}
}
