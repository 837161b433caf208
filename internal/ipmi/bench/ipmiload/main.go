package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/bmlab/bmlab/internal/pace"

	"go.uber.org/zap"

	"github.com/bmlab/bmlab/internal/ipmi"
	"github.com/bmlab/bmlab/internal/ipmi/client"
	"github.com/bmlab/bmlab/internal/ipmi/wire"
	"github.com/bmlab/bmlab/internal/machine"
	"github.com/bmlab/bmlab/internal/sim"
)

var user, pass = "admin", "password"

// pacer paces the clients when -rate is set (nil: no limit).
var pacer *pace.Pacer

func main() {
	mode := flag.String("mode", "qps", "qps, idle, sessions, kcs-rtt, kcs-idle (serve: internal)")
	bmcs := flag.Int("bmcs", 8, "number of BMCs")
	base := flag.Int("base", 40000, "first UDP port on 127.0.0.1")
	clients := flag.Int("clients", 8, "concurrent clients")
	duration := flag.Duration("duration", 10*time.Second, "how long to measure")
	sessions := flag.Int("sessions", 100000, "sessions to open in -mode sessions")
	suite := flag.Int("suite", 17, "cipher suite")
	pid := flag.Int("pid", 0, "drive the BMCs of a running vbmcd (its PID, for CPU and memory) at -base on 127.0.0.1 instead of starting a server; the password comes from IPMILOAD_PASSWORD")
	rate := flag.Int("rate", 0, "at most this many queries a second over all clients, for soaks (default: as fast as the clients go)")
	kcsDir := flag.String("kcs", "", "with -mode kcs-*: the in-band sockets' directory (default: a temporary one)")
	kcsRate := flag.Float64("kcs-rate", 0, "with -mode kcs-*: each machine's in-band rate, requests a second (default: vbmcd's, 200)")
	requests := flag.Int("requests", 2000, "with -mode kcs-rtt: requests per client")
	flag.Parse()
	pacer = pace.New(*rate)
	if *pid != 0 {
		if p := os.Getenv("IPMILOAD_PASSWORD"); p != "" {
			pass = p
		}
	}
	if *mode == "serve" {
		serve(*bmcs, *base, *kcsDir, *kcsRate)
		return
	}
	if strings.HasPrefix(*mode, "kcs-") {
		kcs(*mode, *bmcs, *clients, *requests, *kcsDir, *kcsRate)
		return
	}
	var srv *server
	if *pid != 0 {
		srv = &server{pid: *pid}
	} else {
		srv = startServer(*bmcs, *base)
		defer srv.stop()
	}
	switch *mode {
	case "qps":
		c0 := srv.cpu()
		n, errs := drive(*clients, *bmcs, *base, *suite, *duration, 0)
		cpu := srv.cpu() - c0
		fmt.Printf("queries: %d in %v (%d errors), %.0f queries/s, BMC CPU %.3f ms/query, RSS %d KiB\n",
			n, *duration, errs, float64(n)/duration.Seconds(), float64(cpu.Microseconds())/1000/float64(max(n, 1)), srv.rss())
	case "idle":
		time.Sleep(2 * time.Second) // let start-up settle
		r, c0 := srv.rss(), srv.cpu()
		time.Sleep(*duration)
		cpu := srv.cpu() - c0
		fmt.Printf("idle BMCs: %d, CPU %.3f%% of a core over %v, RSS %d KiB total, %.1f KiB per BMC (upper bound, whole process)\n",
			*bmcs, 100*cpu.Seconds()/duration.Seconds(), *duration, r, float64(r)/float64(*bmcs))
	case "sessions":
		done := 0
		step := *sessions / 10
		for done < *sessions {
			n, errs := drive(*clients, *bmcs, *base, *suite, 0, step)
			done += n
			fmt.Printf("sessions: %7d  errors: %d  RSS %d KiB\n", done, errs, srv.rss())
		}
	}
}

// drive runs clients until d passes (or count queries are done) and returns
// the number of successful queries and errors.
func drive(clients, bmcs, base, suite int, d time.Duration, count int) (int, int) {
	var ok, bad atomic.Int64
	var left atomic.Int64
	left.Store(int64(count))
	deadline := time.Now().Add(d)
	var wg sync.WaitGroup
	for i := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			addr := "127.0.0.1:" + strconv.Itoa(base+i%bmcs)
			for {
				if count > 0 && left.Add(-1) < 0 {
					return
				}
				if count == 0 && time.Now().After(deadline) {
					return
				}
				pacer.Wait(context.Background())
				if query(addr, suite) {
					ok.Add(1)
				} else {
					bad.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	return int(ok.Load()), int(bad.Load())
}

// query is one power-status query in a session of its own.
func query(addr string, suite int) bool {
	c, err := client.Dial(context.Background(), addr, client.Config{Username: user, Password: pass, Suite: suite, Timeout: time.Second})
	if err != nil {
		return false
	}
	code, data, err := c.Do(wire.NetFnChassis, 0x01)
	c.Close()
	return err == nil && code == wire.CodeOK && len(data) >= 3
}

// server is the process that serves the BMCs: a child ipmiload started
// (cmd), or a running vbmcd (pid).
type server struct {
	cmd *exec.Cmd
	pid int
}

func (s *server) procPID() int {
	if s.cmd != nil {
		return s.cmd.Process.Pid
	}
	return s.pid
}

func startServer(n, base int, more ...string) *server {
	cmd := exec.Command("/proc/self/exe", append([]string{"-mode", "serve", "-bmcs", strconv.Itoa(n), "-base", strconv.Itoa(base)}, more...)...)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		panic(err)
	}
	if err := cmd.Start(); err != nil {
		panic(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "ready") {
		panic(fmt.Sprintf("server did not start: %q %v", line, err))
	}
	return &server{cmd: cmd}
}

func (s *server) stop() {
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	_ = s.cmd.Wait()
}

// cpu is the child's user + system CPU time (/proc/PID/stat fields 14, 15).
func (s *server) cpu() time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", s.procPID()))
	if err != nil {
		panic(err)
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * time.Second / 100 // USER_HZ
}

// rss is the child's resident set in KiB.
func (s *server) rss() int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", s.procPID()))
	if err != nil {
		panic(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "VmRSS:") {
			v, _ := strconv.Atoi(strings.Fields(l)[1])
			return v
		}
	}
	return 0
}

// serve runs n BMCs: LAN ones from port base (0: none), and in-band ones
// with their sockets in kcsDir ("": none), at kcsRate requests a second.
func serve(n, base int, kcsDir string, kcsRate float64) {
	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer cancel()
	var opts []sim.Option
	if kcsDir != "" {
		opts = append(opts, sim.WithIPMISockets(kcsDir))
	}
	be := sim.New(n, opts...)
	svc := machine.NewService(be, nil)
	svc.Watch(ctx)
	iopts := []ipmi.Option{ipmi.WithCredentials(machine.Credential{Username: user, Password: pass}), ipmi.WithAddress("127.0.0.1")}
	if base > 0 {
		iopts = append(iopts, ipmi.WithPortBase(base))
	}
	if kcsRate > 0 {
		iopts = append(iopts, ipmi.WithInbandRate(kcsRate, min(kcsRate, 100)))
	}
	mgr := ipmi.NewManager(svc, zap.NewNop(), iopts...)
	go func() {
		for base > 0 && len(mgr.Endpoints()) < n {
			time.Sleep(10 * time.Millisecond)
		}
		for _, m := range be.List() {
			for kcsDir != "" {
				if _, err := os.Stat(m.IPMISocket); err == nil {
					break
				}
				time.Sleep(10 * time.Millisecond)
			}
		}
		fmt.Println("ready")
	}()
	_ = mgr.Run(ctx)
}
