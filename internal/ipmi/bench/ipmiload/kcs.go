package main

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/bmlab/bmlab/internal/ipmi/client"
	"github.com/bmlab/bmlab/internal/ipmi/wire"
	"github.com/bmlab/bmlab/internal/sim"
)

// kcs measures the in-band face over the sim backend, a synthetic qemu
// (client.KCS) on each machine's socket:
//
//	kcs-rtt:  clients machines, one client each, -requests Get Device ID
//	          in turn: the round trip's median and 99th percentile, the
//	          requests a second, the BMC's CPU per request;
//	kcs-idle: n machines with in-band sockets, first with no client, then
//	          with a client connected to each (as qemu is while a VM runs),
//	          against the same machines without in-band: file descriptors,
//	          RSS, idle CPU.
func kcs(mode string, n, clients, requests int, dir string, rate float64) {
	if dir == "" {
		d, err := os.MkdirTemp("", "kcs")
		if err != nil {
			panic(err)
		}
		defer os.RemoveAll(d)
		dir = d
	}
	more := []string{"-kcs", dir}
	if rate > 0 {
		more = append(more, "-kcs-rate", strconv.FormatFloat(rate, 'f', -1, 64))
	}
	be := sim.New(n, sim.WithIPMISockets(dir)) // the same machines, hence sockets, as the server's
	ms := be.List()
	switch mode {
	case "kcs-rtt":
		srv := startServer(n, 0, more...)
		defer srv.stop()
		clients = min(clients, n)
		rtts := make([][]time.Duration, clients)
		var wg sync.WaitGroup
		c0, start := srv.cpu(), time.Now()
		for i := range clients {
			wg.Add(1)
			go func() {
				defer wg.Done()
				k, err := client.DialKCS(context.Background(), ms[i].IPMISocket, client.QEMUCapabilities)
				if err != nil {
					panic(err)
				}
				defer k.Close()
				for range requests {
					t0 := time.Now()
					code, _, err := k.Do(wire.NetFnApp, 0x01)
					if err != nil || code != wire.CodeOK {
						panic(fmt.Sprintf("Get Device ID: %v %v", code, err))
					}
					rtts[i] = append(rtts[i], time.Since(t0))
				}
			}()
		}
		wg.Wait()
		took, cpu := time.Since(start), srv.cpu()-c0
		all := slices.Concat(rtts...)
		slices.Sort(all)
		fmt.Printf("in-band round trips: %d clients × %d Get Device ID in %v: %.0f requests/s, median %v, p99 %v, max %v; BMC CPU %.3f ms/request\n",
			clients, requests, took.Round(time.Millisecond), float64(len(all))/took.Seconds(),
			all[len(all)/2].Round(time.Microsecond), all[len(all)*99/100].Round(time.Microsecond), all[len(all)-1].Round(time.Microsecond),
			float64(cpu.Microseconds())/1000/float64(len(all)))
	case "kcs-idle":
		base := startServer(n, 0)
		time.Sleep(2 * time.Second)
		fd0, rss0 := base.fds(), base.rss()
		base.stop()
		srv := startServer(n, 0, more...)
		defer srv.stop()
		time.Sleep(2 * time.Second)
		fd1, rss1 := srv.fds(), srv.rss()
		var ks []*client.KCS
		for _, m := range ms {
			k, err := client.DialKCS(context.Background(), m.IPMISocket, client.QEMUCapabilities)
			if err != nil {
				panic(err)
			}
			if code, _, err := k.Do(wire.NetFnApp, 0x01); err != nil || code != wire.CodeOK {
				panic(fmt.Sprintf("Get Device ID: %v %v", code, err))
			}
			ks = append(ks, k)
		}
		time.Sleep(2 * time.Second)
		fd2, rss2 := srv.fds(), srv.rss()
		c0 := srv.cpu()
		time.Sleep(10 * time.Second)
		cpu := srv.cpu() - c0
		for _, k := range ks {
			k.Close()
		}
		fmt.Printf("%d machines: without in-band %d fds, RSS %d KiB; with their sockets listening %d fds, %d KiB; with a client on each %d fds, %d KiB, idle CPU %.2f%% of a core over 10 s\n",
			n, fd0, rss0, fd1, rss1, fd2, rss2, 100*cpu.Seconds()/10)
		fmt.Printf("per machine: %.2f fds, %.1f KiB (listening and connected, over none)\n",
			float64(fd2-fd0)/float64(n), float64(rss2-rss0)/float64(n))
	default:
		panic("unknown mode " + mode)
	}
}

// fds is the server's open file descriptors.
func (s *server) fds() int {
	es, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", s.procPID()))
	if err != nil {
		panic(err)
	}
	return len(es)
}
