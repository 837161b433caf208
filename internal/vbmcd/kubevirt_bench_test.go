package vbmcd

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/bmlab/bmlab/internal/kubevirt/kubevirttest"
	"github.com/bmlab/bmlab/internal/testenv"
)

// getLoad runs b.N GET /redfish/v1/Systems/{id} over HTTPS with Basic
// auth from 8 keep-alive clients, round-robin over ids, trusting the
// daemon's certificate in ca, and reports reqs/s.
func getLoad(b *testing.B, url, ca string, ids []string) {
	client := trustingClient(b, ca, 5*time.Second, 64)
	var next atomic.Uint64
	b.SetParallelism(4) // 8 clients on 2 CPUs
	b.ResetTimer()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			req, _ := http.NewRequest(http.MethodGet, url+"/redfish/v1/Systems/"+ids[next.Add(1)%uint64(len(ids))], nil)
			req.SetBasicAuth("admin", "e2e-pass")
			resp, err := client.Do(req)
			if err != nil {
				b.Error(err)
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				b.Errorf("GET: %d", resp.StatusCode)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "reqs/s")
}

// heap is the live heap after a collection.
func heap() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// benchMachines is how many VirtualMachines BenchmarkKubeVirtSystems
// serves.
const benchMachines = 1000

// BenchmarkKubeVirtSystems is vbmcd over 1,000 KubeVirt VirtualMachines
// as it runs in a cluster: KubeVirt's virt-api (whose webhooks admit each
// VM and give it its firmware UUID, by which it is served) and
// virt-controller running, the fixture's node and CDI (kubevirttest),
// vbmcd as its ServiceAccount with contrib/kubevirt/vbmcd.yaml's Role.
//
//   - get: GET /Systems/{id} over HTTPS from 8 keep-alive clients,
//     round-robin over the 1,000 (reqs/s): vbmcd's read path, which costs
//     no API round trip (the informers' snapshot and the render cache);
//   - change-seen: an owner's edit of a VM (its memory, 128 Mi ↔ 256 Mi, a
//     merge patch through kube-apiserver and KubeVirt's webhooks) until a
//     GET of its system shows it (MemorySummary), polled every 2 ms
//     (ms-to-seen per change): the watch, vbmcd's informer, its snapshot
//     and render cache.
//
// The setup also reports how long vbmcd took from start to serving all
// 1,000 (ms-to-serve) and the heap it grew by per VM (heap-B/VM,
// in-process: its informers' caches and snapshots; IPMI off).
// BenchmarkKubeVirtPowerOn times a power-on through such a cluster.
func BenchmarkKubeVirtSystems(b *testing.B) {
	f := kubevirttest.Start(b, "lab", "kvb-sys-")
	kv := kubevirtREST(b, f, kubevirtv1.SchemeGroupVersion)
	ctx := context.Background()
	proto := kubevirtVM(b, f.Namespace, "proto", map[string]string{"bmlab.io/bmc": "yes"})
	names := make([]string, benchMachines)
	for i := range names {
		vm := proto.DeepCopy()
		vm.Name = fmt.Sprintf("node-%04d", i)
		names[i] = vm.Name
		if err := kv.Post().Namespace(f.Namespace).Resource("virtualmachines").Body(vm).Do(ctx).Error(); err != nil {
			b.Fatalf("create VirtualMachine %s: %v", vm.Name, err)
		}
	}
	// The firmware UUIDs KubeVirt's webhook gave the VMs.
	list := &kubevirtv1.VirtualMachineList{}
	if err := kv.Get().Namespace(f.Namespace).Resource("virtualmachines").Do(ctx).Into(list); err != nil {
		b.Fatal(err)
	}
	byName := map[string]string{}
	for _, vm := range list.Items {
		if fw := vm.Spec.Template.Spec.Domain.Firmware; fw != nil && fw.UUID != "" {
			byName[vm.Name] = string(fw.UUID)
		}
	}
	ids := make([]string, benchMachines)
	for i, n := range names {
		if ids[i] = byName[n]; ids[i] == "" {
			b.Fatalf("VirtualMachine %s has no firmware UUID after KubeVirt admitted it", n)
		}
	}
	kubeconfig := f.VBMCDKubeconfig(b, nil)
	before := heap()
	start := time.Now()
	url := kubevirtDaemon(b, f, kubeconfig)
	took := time.Since(start)
	grown := float64(heap()) - float64(before)
	ca := caFile
	hc := trustingClient(b, ca, 5*time.Second, 0)
	memory := func(id string) float64 {
		req, _ := http.NewRequest(http.MethodGet, url+"/redfish/v1/Systems/"+id, nil)
		req.SetBasicAuth("admin", "e2e-pass")
		resp, err := hc.Do(req)
		if err != nil {
			return -1
		}
		defer resp.Body.Close()
		var v struct {
			MemorySummary struct{ TotalSystemMemoryGiB float64 }
		}
		if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&v) != nil {
			return -1
		}
		return v.MemorySummary.TotalSystemMemoryGiB
	}
	if !testenv.WaitFor(time.Minute, func() bool { return memory(ids[len(ids)-1]) == 0.125 }) {
		b.Fatalf("vbmcd does not serve %s (the last VM) with 128 MiB", ids[len(ids)-1])
	}

	b.Run(fmt.Sprintf("machines=%d/get", benchMachines), func(b *testing.B) {
		getLoad(b, url, ca, ids) // resets the timer and the metrics reported before
		b.ReportMetric(float64(took.Milliseconds()), "ms-to-serve")
		b.ReportMetric(grown/benchMachines, "heap-B/VM")
	})
	b.Run(fmt.Sprintf("machines=%d/change-seen", benchMachines), func(b *testing.B) {
		size := map[string]string{} // VM → the memory it has now
		var total time.Duration
		b.ResetTimer()
		for i := range b.N {
			n, id := names[i%len(names)], ids[i%len(ids)]
			to, gib := "256Mi", 0.25
			if size[n] == "256Mi" {
				to, gib = "128Mi", 0.125
			}
			patch := fmt.Sprintf(`{"spec":{"template":{"spec":{"domain":{"memory":{"guest":%q},"resources":{"requests":{"memory":%q}}}}}}}`, to, to)
			began := time.Now()
			if err := kv.Patch(types.MergePatchType).Namespace(f.Namespace).Resource("virtualmachines").Name(n).
				Body([]byte(patch)).Do(ctx).Error(); err != nil {
				b.Fatalf("patch %s: %v", n, err)
			}
			for memory(id) != gib {
				if time.Since(began) > 30*time.Second {
					b.Fatalf("%s: %v GiB 30 s after its memory was set to %s", n, memory(id), to)
				}
				time.Sleep(2 * time.Millisecond)
			}
			total += time.Since(began)
			size[n] = to
		}
		b.ReportMetric(float64(total.Microseconds())/1000/float64(b.N), "ms-to-seen")
	})
}

// BenchmarkKubeVirtPowerOn times a Redfish On until the system reads
// PowerState On, through KubeVirt's own virt-api and virt-controller
// (start subresource, state change request, the instance, its
// virt-launcher pod) and the fixture's node (scheduling the pod, the
// libvirt domain under TCG, the instance reported Running): ms-to-On per
// power-on. Each iteration powers the VM off first (not timed). vbmcd
// runs as its ServiceAccount; GET is polled every 20 ms.
func BenchmarkKubeVirtPowerOn(b *testing.B) {
	f, _, _, id := oneKubeVirtVM(b, "kvb-on-", "on-0")
	url := kubevirtDaemon(b, f, f.VBMCDKubeconfig(b, nil))
	sys := url + "/redfish/v1/Systems/" + id
	power := func() string {
		r, err := send("GET", sys, "admin", "e2e-pass", "")
		if err != nil {
			return ""
		}
		var v struct{ PowerState string }
		_ = json.Unmarshal(r.Body, &v)
		return v.PowerState
	}
	reset := func(rt string) {
		if r, err := send("POST", sys+"/Actions/ComputerSystem.Reset", "admin", "e2e-pass", `{"ResetType":"`+rt+`"}`); err != nil || r.Code/100 != 2 {
			b.Fatalf("%s: %v %d %s", rt, err, r.Code, r.Body)
		}
	}
	waitPower := func(want string) {
		if !testenv.WaitFor(2*time.Minute, func() bool { return power() == want }) {
			b.Fatalf("PowerState %q, want %q", power(), want)
		}
	}
	var total time.Duration
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		if power() != "Off" {
			reset("ForceOff")
			waitPower("Off")
		}
		b.StartTimer()
		start := time.Now()
		reset("On")
		for power() != "On" {
			time.Sleep(20 * time.Millisecond) // polling the system, as a client does
			if time.Since(start) > 2*time.Minute {
				b.Fatalf("PowerState %q 2 min after On", power())
			}
		}
		total += time.Since(start)
	}
	b.ReportMetric(float64(total.Milliseconds())/float64(b.N), "ms-to-On")
}
