package vbmcd

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/bmlab/bmlab/internal/kubevirt"
	"github.com/bmlab/bmlab/internal/kubevirt/kubetest"
	"github.com/bmlab/bmlab/internal/kubevirt/kubevirttest"
	"github.com/bmlab/bmlab/internal/labvirt"
	"github.com/bmlab/bmlab/internal/machine"
	"github.com/bmlab/bmlab/internal/testenv"
	"github.com/bmlab/bmlab/internal/virttest"
)

// getLoad runs b.N GET /redfish/v1/Systems/{id} over HTTPS with Basic
// auth from 8 keep-alive clients, round-robin over ids, trusting the
// daemon's certificate in ca, and reports reqs/s (the harness of
// BenchmarkMultiHostGetSystem).
func getLoad(b *testing.B, url, ca string, ids []string) {
	pool := x509.NewCertPool()
	pem, err := os.ReadFile(ca)
	if err != nil || !pool.AppendCertsFromPEM(pem) {
		b.Fatalf("read the daemon's certificate: %v", err)
	}
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool}, MaxIdleConnsPerHost: 64}}
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

// backendGets runs b.N Get of a random machine of ids on be from 8
// goroutines: a backend's own read path, without vbmcd's faces and their
// render cache.
func backendGets(b *testing.B, be machine.Backend, ids []string) {
	b.SetParallelism(4)
	b.ResetTimer()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := be.Get(ids[rand.IntN(len(ids))]); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "gets/s")
}

// heap is the live heap after a collection.
func heap() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// benchMachines is how many machines each backend serves in
// BenchmarkKubeVirtGetSystem.
const benchMachines = 1000

// BenchmarkKubeVirtGetSystem compares the KubeVirt backend with the
// libvirt backend in one run, 1,000 machines each: 1,000 VirtualMachines
// (objects in a real kube-apiserver with KubeVirt's CRDs; reads never
// reach the cluster, and no control plane is needed for them) and 1,000
// libvirt domains defined on the system libvirtd (not running).
//
//   - read=backend: machine.Backend.Get of a random machine, 8 readers:
//     each backend's own read path (the informer-fed snapshot, the
//     event-fed domain cache), without vbmcd's faces;
//   - read=redfish: GET /Systems/{id} over HTTPS through vbmcd, round-robin
//     over the 1,000: the whole path, where vbmcd's render cache serves
//     both backends alike once a body is rendered.
//
// The kubevirt setup also reports how long vbmcd took from start to
// serving all 1,000 (ms-to-serve) and the heap it grew by per VM
// (heap-B/VM, in-process: informers' caches, snapshots, IPMI off).
func BenchmarkKubeVirtGetSystem(b *testing.B) {
	// KubeVirt: 1,000 VirtualMachines.
	api := kubetest.Start(b)
	kubevirttest.InstallCRDs(b, api)
	kv, err := kubevirt.NewRESTClient(api.RestConfig(), kubevirtv1.SchemeGroupVersion)
	if err != nil {
		b.Fatal(err)
	}
	halted := kubevirtv1.RunStrategyHalted
	kvIDs := make([]string, benchMachines)
	for i := range benchMachines {
		vm := &kubevirtv1.VirtualMachine{
			TypeMeta:   metav1.TypeMeta{APIVersion: "kubevirt.io/v1", Kind: "VirtualMachine"},
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("node-%04d", i), Namespace: "default", Labels: map[string]string{"bmlab.io/bmc": "yes"}},
			Spec: kubevirtv1.VirtualMachineSpec{RunStrategy: &halted, Template: &kubevirtv1.VirtualMachineInstanceTemplateSpec{
				Spec: kubevirtv1.VirtualMachineInstanceSpec{Domain: kubevirtv1.DomainSpec{
					Resources: kubevirtv1.ResourceRequirements{Requests: corev1.ResourceList{"memory": resource.MustParse("8Gi")}},
					Devices: kubevirtv1.Devices{
						Disks: []kubevirtv1.Disk{
							{Name: "root", DiskDevice: kubevirtv1.DiskDevice{Disk: &kubevirtv1.DiskTarget{Bus: kubevirtv1.DiskBusVirtio}}},
							{Name: "cd", DiskDevice: kubevirtv1.DiskDevice{CDRom: &kubevirtv1.CDRomTarget{Bus: kubevirtv1.DiskBusSATA}}},
						},
						Interfaces: []kubevirtv1.Interface{{Name: "default", InterfaceBindingMethod: kubevirtv1.InterfaceBindingMethod{Bridge: &kubevirtv1.InterfaceBridge{}}}},
					},
				}},
			}},
		}
		if err := kv.Post().Namespace("default").Resource("virtualmachines").Body(vm).Do(context.Background()).Error(); err != nil {
			b.Fatal(err)
		}
		kvIDs[i] = kubevirt.FirmwareUUID(vm)
	}
	kvBackend, err := kubevirt.New(kubevirt.Config{Rest: api.RestConfig(), Namespaces: []string{"default"}, Selector: "bmlab.io/bmc=yes"}, testenv.Logger(b))
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	b.Cleanup(cancel)
	if err := kvBackend.Run(ctx, time.Minute); err != nil {
		b.Fatal(err)
	}
	before := heap()
	start := time.Now()
	kvURL := daemon(b, "", func(c *Config) {
		c.Backend, c.Kubeconfig, c.KubeNamespaces, c.KubeSelector = "kubevirt", api.Kubeconfig, []string{"default"}, "bmlab.io/bmc=yes"
	})
	took := time.Since(start)
	grown := float64(heap()) - float64(before)
	kvCA := caFile

	// libvirt: 1,000 domains defined on the system libvirtd.
	const prefix = "kvb-lv-"
	lab := virttest.New(b, prefix)
	lv := labvirt.Wrap(lab.Client)
	var lvNames []string
	b.Cleanup(func() {
		for _, n := range lvNames {
			_ = lv.DeleteDomain(context.Background(), n)
		}
	})
	for i := range benchMachines {
		name := fmt.Sprintf("%s%04d", prefix, i)
		if _, err := lv.DefineDomain(ctx, labvirt.DomainSpec{Name: name, MemoryMiB: 64, VCPUs: 1}); err != nil {
			b.Fatal(err)
		}
		lvNames = append(lvNames, name)
	}
	if !testenv.WaitFor(time.Minute, func() bool { return len(lab.Backend.List()) == benchMachines }) {
		b.Fatalf("the libvirt backend serves %d domains, want %d", len(lab.Backend.List()), benchMachines)
	}
	var lvIDs []string
	for _, m := range lab.Backend.List() {
		lvIDs = append(lvIDs, m.ID)
	}
	lvURL := daemon(b, prefix, func(c *Config) { c.IPMI = false })
	lvCA := caFile

	b.Run(fmt.Sprintf("backend=kubevirt/machines=%d/read=backend", benchMachines), func(b *testing.B) { backendGets(b, kvBackend, kvIDs) })
	b.Run(fmt.Sprintf("backend=libvirt/machines=%d/read=backend", benchMachines), func(b *testing.B) { backendGets(b, lab.Backend, lvIDs) })
	b.Run(fmt.Sprintf("backend=kubevirt/machines=%d/read=redfish", benchMachines), func(b *testing.B) {
		getLoad(b, kvURL, kvCA, kvIDs) // resets the timer and the metrics reported before
		b.ReportMetric(float64(took.Milliseconds()), "ms-to-serve")
		b.ReportMetric(grown/benchMachines, "heap-B/VM")
	})
	b.Run(fmt.Sprintf("backend=libvirt/machines=%d/read=redfish", benchMachines), func(b *testing.B) { getLoad(b, lvURL, lvCA, lvIDs) })
}

// BenchmarkKubeVirtPowerOn times a Redfish On until the system reads
// PowerState On, through KubeVirt's own virt-api and virt-controller
// (start subresource, state change request, the instance, its
// virt-launcher pod) and the fixture's node (scheduling the pod, the
// libvirt domain under TCG, the instance reported Running): ms-to-On per
// power-on. Each iteration powers the VM off first (not timed). vbmcd
// runs as its ServiceAccount; GET is polled every 20 ms.
func BenchmarkKubeVirtPowerOn(b *testing.B) {
	f := kubevirttest.Start(b, "lab", "kvb-on-")
	vm := kubevirtVM(b, f.Namespace, "on-0", map[string]string{"bmlab.io/bmc": "yes"})
	kv, err := kubevirt.NewRESTClient(f.API.RestConfig(), kubevirtv1.SchemeGroupVersion)
	if err != nil {
		b.Fatal(err)
	}
	if err := kv.Post().Namespace(vm.Namespace).Resource("virtualmachines").Body(vm).Do(context.Background()).Error(); err != nil {
		b.Fatal(err)
	}
	got := &kubevirtv1.VirtualMachine{}
	if err := kv.Get().Namespace(vm.Namespace).Resource("virtualmachines").Name(vm.Name).Do(context.Background()).Into(got); err != nil {
		b.Fatal(err)
	}
	id := string(got.Spec.Template.Spec.Domain.Firmware.UUID)
	url := daemon(b, "", func(c *Config) {
		c.Backend, c.Kubeconfig = "kubevirt", f.VBMCDKubeconfig(b, nil)
		c.KubeNamespaces, c.KubeSelector = []string{f.Namespace}, "bmlab.io/bmc=yes"
	})
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
