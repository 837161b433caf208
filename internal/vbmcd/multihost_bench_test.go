package vbmcd

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/bmlab/bmlab/internal/virt"
	"github.com/bmlab/bmlab/internal/virttest"
)

// BenchmarkMultiHostGetSystem: GET /redfish/v1/Systems/{id} over HTTPS
// with Basic auth, 8 keep-alive clients, against one vbmcd serving two VMs,
// both on one libvirt host (hosts=1) or one on each of two (hosts=2). The
// hosts are Underlays reached over qemu+tcp in both cases; reqs/s is the
// figure to compare.
func BenchmarkMultiHostGetSystem(b *testing.B) {
	for _, n := range []int{1, 2} {
		b.Run(fmt.Sprintf("hosts=%d", n), func(b *testing.B) {
			prefix := fmt.Sprintf("mhb%d-", n)
			var hosts []virt.Host
			var labs []*virttest.Lab
			for i := range n {
				u := virttest.NewUnderlay(b, fmt.Sprintf("h%d", i), i)
				hosts = append(hosts, virt.Host{Name: u.Name, URI: u.URI})
				labs = append(labs, virttest.NewAt(b, u.URI, prefix))
			}
			var ids []string
			for i := range 2 {
				ids = append(ids, labs[i%n].NewVM(b, fmt.Sprint(i), virttest.VMOptions{NoCD: true}).ID)
			}
			url := daemon(b, prefix, func(c *Config) { c.Libvirt, c.IPMI = hosts, false })
			getLoad(b, url, caFile, ids)
		})
	}
}

// BenchmarkMultiHostReconnect: one vbmcd over two libvirt hosts; each
// iteration kills one host's libvirtd (SIGKILL), polls GET /Systems/{id} of
// its VM every millisecond until it reads UnavailableOffline, restarts
// libvirtd, and polls until the VM reads as available again.
// ms-to-unavailable counts from the kill, ms-to-whole from the moment the
// restarted libvirtd accepts connections.
func BenchmarkMultiHostReconnect(b *testing.B) {
	prefix := "mhr-"
	ua := virttest.NewUnderlay(b, "alpha", 0)
	ub := virttest.NewUnderlay(b, "beta", 1)
	vm := virttest.NewAt(b, ua.URI, prefix).NewVM(b, "a", virttest.VMOptions{NoCD: true})
	virttest.NewAt(b, ub.URI, prefix).NewVM(b, "b", virttest.VMOptions{NoCD: true})
	url := daemon(b, prefix, func(c *Config) {
		c.Libvirt, c.IPMI = []virt.Host{{Name: ua.Name, URI: ua.URI}, {Name: ub.Name, URI: ub.URI}}, false
	})
	client := trustingClient(b, caFile, 5*time.Second, 0)
	unavailable := func() bool {
		req, _ := http.NewRequest(http.MethodGet, url+"/redfish/v1/Systems/"+vm.ID, nil)
		req.SetBasicAuth("admin", "e2e-pass")
		resp, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		defer resp.Body.Close()
		var v struct{ Status struct{ State string } }
		if err := json.NewDecoder(resp.Body).Decode(&v); err != nil || resp.StatusCode != http.StatusOK {
			b.Fatalf("GET: %d %v", resp.StatusCode, err)
		}
		return v.Status.State == "UnavailableOffline"
	}
	until := func(want bool, from time.Time, limit time.Duration) time.Duration {
		for unavailable() != want {
			if time.Since(from) > limit {
				b.Fatalf("the VM's unavailability did not become %v within %s", want, limit)
			}
			time.Sleep(time.Millisecond)
		}
		return time.Since(from)
	}
	var down, up, maxDown, maxUp time.Duration
	b.ResetTimer()
	for b.Loop() {
		killed := time.Now()
		ua.Kill(b)
		d := until(true, killed, time.Second)
		ua.Start(b)
		u := until(false, time.Now(), 2*time.Second)
		down, up = down+d, up+u
		maxDown, maxUp = max(maxDown, d), max(maxUp, u)
	}
	n := float64(b.N)
	b.ReportMetric(float64(down.Microseconds())/1000/n, "ms-to-unavailable")
	b.ReportMetric(float64(maxDown.Microseconds())/1000, "max-ms-to-unavailable")
	b.ReportMetric(float64(up.Microseconds())/1000/n, "ms-to-whole")
	b.ReportMetric(float64(maxUp.Microseconds())/1000, "max-ms-to-whole")
}
