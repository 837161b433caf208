package vbmcd

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
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
	"github.com/bmlab/bmlab/internal/virttest"
)

// getLoad runs b.N GET /redfish/v1/Systems/{id} over HTTPS with Basic
// auth from 8 keep-alive clients, round-robin over ids, and reports
// reqs/s (the harness of BenchmarkMultiHostGetSystem).
func getLoad(b *testing.B, url string, ids []string) {
	pool := x509.NewCertPool()
	pem, err := os.ReadFile(caFile)
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

// heap is the live heap after a collection.
func heap() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// BenchmarkKubeVirtGetSystem: GET /Systems/{id} (see getLoad) against
// vbmcd --backend kubevirt serving 1,000 VirtualMachines (objects in a real
// kube-apiserver with KubeVirt's CRDs; no instances: reads never reach the
// cluster), and against vbmcd --backend libvirt serving 20 defined domains,
// for comparison. The kubevirt run also reports how long vbmcd took from
// start to serving all 1,000 (ms-to-serve: list + watch of every VM and
// instance) and the heap it grew by per VM served (heap-B/VM, in-process:
// informers' caches, snapshots, IPMI off).
func BenchmarkKubeVirtGetSystem(b *testing.B) {
	b.Run("backend=kubevirt", func(b *testing.B) {
		const n = 1000
		api := kubetest.Start(b)
		kubevirttest.InstallCRDs(b, api)
		kv, err := kubevirt.NewRESTClient(api.RestConfig(), kubevirtv1.SchemeGroupVersion)
		if err != nil {
			b.Fatal(err)
		}
		halted := kubevirtv1.RunStrategyHalted
		ids := make([]string, n)
		for i := range n {
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
			ids[i] = kubevirt.FirmwareUUID(vm)
		}
		kc := b.TempDir() + "/kubeconfig"
		if err := api.WriteKubeconfig(kc, api.URL, api.Token); err != nil {
			b.Fatal(err)
		}
		before := heap()
		start := time.Now()
		url := daemon(b, "", func(c *Config) {
			c.Backend, c.Kubeconfig, c.KubeNamespaces, c.KubeSelector = "kubevirt", kc, []string{"default"}, "bmlab.io/bmc=yes"
		})
		took := time.Since(start)
		grown := float64(heap()) - float64(before)
		// The same 1,000 served, read round-robin over all of them and
		// over 20 (as many as the libvirt run has).
		for _, spread := range []int{n, 20} {
			b.Run(fmt.Sprintf("vms=%d/read=%d", n, spread), func(b *testing.B) {
				getLoad(b, url, ids[:spread]) // resets the timer and the metrics reported before
				b.ReportMetric(float64(took.Milliseconds()), "ms-to-serve")
				b.ReportMetric(grown/n, "heap-B/VM")
			})
		}
	})
	b.Run("backend=libvirt/vms=20/read=20", func(b *testing.B) {
		const prefix = "kvb-lv-"
		lab := virttest.New(b, prefix)
		var ids []string
		for i := range 20 {
			ids = append(ids, lab.NewVM(b, fmt.Sprint(i), virttest.VMOptions{NoCD: true}).ID)
		}
		url := daemon(b, prefix, func(c *Config) { c.IPMI = false })
		getLoad(b, url, ids)
	})
}
