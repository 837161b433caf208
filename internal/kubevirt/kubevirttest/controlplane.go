package kubevirttest

import (
	"context"
	"encoding/base64"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/bmlab/bmlab/internal/kubevirt"
	"github.com/bmlab/bmlab/internal/kubevirt/kubetest"
	"github.com/bmlab/bmlab/internal/testenv"
)

// KubeVirt's control plane in the tests: virt-api and virt-controller as
// the binaries hack/build-kube.sh builds from kubevirt.io/kubevirt v1.8.0,
// registered with the test's kube-apiserver the way virt-operator
// registers them (testdata/kubevirt-control-plane.yaml, made by
// virt-operator's own code): their namespace "kubevirt", service accounts
// and RBAC, virt-api's Service, the APIService v1.subresources.kubevirt.io
// and the validating and mutating webhook configurations, each with the CA
// bundle of a KubeVirt CA of the test's own, and the KubeVirt CR with its
// configuration and feature gates.
//
// One change from a cluster: virt-api's Service is an ExternalName Service
// naming 127.0.0.1, and the APIService and the webhooks carry virt-api's
// port, because kube-apiserver reaches an extension server through a
// Service and there is no kube-proxy here to carry a ClusterIP to
// loopback. kube-apiserver's aggregation layer then proxies
// /apis/subresources.kubevirt.io to virt-api with its front proxy client
// certificate, as in a cluster, and calls the webhooks on every
// VirtualMachine and instance write.

// Namespace KubeVirt is installed into (virt-operator's default, which
// virt-api and virt-controller assume when they run outside a pod).
const KubeVirtNamespace = "kubevirt"

// Feature gates the fixture always turns on: HostDisk, because the test
// VMs' disks are files on this machine (hostDisk volumes). A test adds
// others (DeclarativeHotplugVolumes) with WithFeatureGates.
var baseGates = []string{"HostDisk"}

type controlPlane struct {
	ca          *kubetest.CA // KubeVirt's CA: the kubevirt-ca ConfigMap
	dir         string
	apiPort     int
	handlerPort int // the fixture's virt-handler server, which virt-api calls
	logs        map[string]string
	procs       []*exec.Cmd
}

// installKubeVirt installs KubeVirt's CRDs and control plane into api and
// starts virt-api and virt-controller; it returns once the APIService is
// available, the webhooks answer and virt-controller leads.
func installKubeVirt(t testing.TB, api *kubetest.Server, gates []string) *controlPlane {
	t.Helper()
	apiBin, ctlBin := kubetest.Tool(t, "virt-api"), kubetest.Tool(t, "virt-controller")
	cp := &controlPlane{ca: kubetest.NewCA(t, "kubevirt.io"), dir: t.TempDir(),
		apiPort: testenv.Port(t, "127.0.0.1"), handlerPort: testenv.Port(t, "127.0.0.1"), logs: map[string]string{}}
	api.EnsureNamespace(t, KubeVirtNamespace)
	InstallCRDs(t, api)
	ctx := context.Background()
	cs := api.Clientset(t)
	if _, err := cs.CoreV1().ConfigMaps(KubeVirtNamespace).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "kubevirt-ca"},
		Data:       map[string]string{"ca-bundle": string(cp.ca.PEM)},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cp.applyControlPlane(t, api)
	cp.createKubeVirtCR(t, api, gates)

	// The certificates in a directory of their own: virt-api's and
	// virt-controller's certificate managers watch the directory and
	// reload (and log) on every change in it, which the logs beside them
	// would cause without end.
	certs := t.TempDir()
	f := func(name string) string { return filepath.Join(certs, name) }
	loop := []net.IP{net.IPv4(127, 0, 0, 1)}
	cp.ca.IssueFiles(t, kubetest.Leaf{CN: "virt-api", DNS: []string{"virt-api." + KubeVirtNamespace + ".svc"}, IPs: loop, Server: true},
		f("virt-api.crt"), f("virt-api.key"))
	// virt-api calls virt-handler with this certificate; the fixture's
	// handler checks it as virt-handler does (KubeVirt's CA, this name).
	cp.ca.IssueFiles(t, kubetest.Leaf{CN: "kubevirt.io:system:client:virt-handler", Client: true},
		f("handler-client.crt"), f("handler-client.key"))
	cp.ca.IssueFiles(t, kubetest.Leaf{CN: "virt-controller", IPs: loop, Server: true}, f("controller.crt"), f("controller.key"))

	cp.start(t, "virt-api", apiBin,
		"--kubeconfig", api.ServiceAccountKubeconfig(t, KubeVirtNamespace, "kubevirt-apiserver"),
		"--listen", "127.0.0.1", "--port", strconv.Itoa(cp.apiPort),
		"--tls-cert-file", f("virt-api.crt"), "--tls-key-file", f("virt-api.key"),
		"--handler-cert-file", f("handler-client.crt"), "--handler-key-file", f("handler-client.key"),
		"--console-server-port", strconv.Itoa(cp.handlerPort),
		"--subresources-only=false")
	cp.start(t, "virt-controller", ctlBin,
		"--kubeconfig", api.ServiceAccountKubeconfig(t, KubeVirtNamespace, "kubevirt-controller"),
		"--listen", "127.0.0.1", "--port", strconv.Itoa(testenv.Port(t, "127.0.0.1")),
		"--prom-cert-file", f("controller.crt"), "--prom-key-file", f("controller.key"),
		// Pods of this image never run: the fixture's node plays them.
		"--launcher-image", "quay.io/kubevirt/virt-launcher:v1.8.0",
		"--exporter-image", "quay.io/kubevirt/virt-exportserver:v1.8.0")
	cp.waitReady(t, api)
	return cp
}

// start runs a KubeVirt binary until the test ends, its output in a file
// whose end a failing test prints.
func (cp *controlPlane) start(t testing.TB, name, bin string, args ...string) {
	t.Helper()
	logPath := filepath.Join(cp.dir, name+".log")
	out, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	c := exec.Command(bin, args...)
	c.Stdout, c.Stderr = out, out
	if err := c.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	cp.logs[name] = logPath
	cp.procs = append(cp.procs, c)
	t.Cleanup(func() {
		// No graceful stop: virt-api waits 5 s before it shuts down, and
		// neither keeps state of its own.
		_ = c.Process.Kill()
		_ = c.Wait()
		out.Close()
		if t.Failed() {
			t.Logf("%s's log ends (%s):\n%s\nits last errors and warnings:\n%s", name, logPath, tail(logPath, 15), problems(logPath, 25))
		}
		// BMLAB_KUBEVIRT_LOGS=DIR keeps the logs past the test.
		if d := os.Getenv("BMLAB_KUBEVIRT_LOGS"); d != "" {
			if b, err := os.ReadFile(logPath); err == nil {
				_ = os.WriteFile(filepath.Join(d, strings.ReplaceAll(t.Name(), "/", "_")+"-"+name+".log"), b, 0o644)
			}
		}
	})
}

// problems returns the last n error and warning lines of a KubeVirt log,
// without the conflicts its controllers retry.
func problems(path string, n int) string {
	b, _ := os.ReadFile(path)
	var lines []string
	for _, l := range strings.Split(string(b), "\n") {
		if (strings.Contains(l, `"level":"error"`) || strings.Contains(l, `"level":"warning"`)) && !strings.Contains(l, "the object has been modified") {
			lines = append(lines, l)
		}
	}
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// tail returns the last n lines of a KubeVirt log, without the lines its
// certificate managers print on every TLS handshake.
func tail(path string, n int) string {
	b, _ := os.ReadFile(path)
	var lines []string
	for _, l := range strings.Split(strings.TrimRight(string(b), "\n"), "\n") {
		if !strings.Contains(l, `"pos":"cert-manager.go`) {
			lines = append(lines, l)
		}
	}
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// applyControlPlane creates testdata/kubevirt-control-plane.yaml's objects,
// with virt-api's Service made an ExternalName Service and the APIService
// and webhooks given virt-api's port and the KubeVirt CA.
func (cp *controlPlane) applyControlPlane(t testing.TB, api *kubetest.Server) {
	t.Helper()
	dc, err := dynamic.NewForConfig(api.RestConfig())
	if err != nil {
		t.Fatal(err)
	}
	port := int64(cp.apiPort)
	for _, u := range manifestObjects(t, filepath.Join(testenv.RepoRoot(), "internal", "kubevirt", "testdata", "kubevirt-control-plane.yaml")) {
		obj := u.Object
		gvr, ok := kinds[u.GetKind()]
		if !ok {
			t.Fatalf("kubevirt-control-plane.yaml: kind %s unknown to the fixture", u.GetKind())
		}
		switch u.GetKind() {
		case "Service":
			_ = unstructured.SetNestedField(obj, "ExternalName", "spec", "type")
			_ = unstructured.SetNestedField(obj, "127.0.0.1", "spec", "externalName")
			unstructured.RemoveNestedField(obj, "spec", "selector")
		case "APIService":
			_ = unstructured.SetNestedField(obj, port, "spec", "service", "port")
			_ = unstructured.SetNestedField(obj, b64(cp.ca.PEM), "spec", "caBundle")
		case "ValidatingWebhookConfiguration", "MutatingWebhookConfiguration":
			hooks, _, _ := unstructured.NestedSlice(obj, "webhooks")
			for i := range hooks {
				h := hooks[i].(map[string]any)
				_ = unstructured.SetNestedField(h, port, "clientConfig", "service", "port")
				_ = unstructured.SetNestedField(h, b64(cp.ca.PEM), "clientConfig", "caBundle")
			}
			_ = unstructured.SetNestedSlice(obj, hooks, "webhooks")
		}
		res := dc.Resource(gvr)
		var err error
		if ns := u.GetNamespace(); ns != "" {
			_, err = res.Namespace(ns).Create(context.Background(), u, metav1.CreateOptions{})
		} else {
			_, err = res.Create(context.Background(), u, metav1.CreateOptions{})
		}
		if err != nil {
			t.Fatalf("create %s %s: %v", u.GetKind(), u.GetName(), err)
		}
	}
}

// b64 is how unstructured objects carry []byte fields.
func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }

// createKubeVirtCR makes the KubeVirt CR "kubevirt" with the feature gates,
// emulation (no /dev/kvm here: the fixture's domains run under TCG) and
// the status virt-operator would write (phase Deployed, which virt-api and
// virt-controller wait for before they take its configuration).
func (cp *controlPlane) createKubeVirtCR(t testing.TB, api *kubetest.Server, gates []string) {
	t.Helper()
	kv, err := kubevirt.NewRESTClient(api.RestConfig(), kubevirtv1.SchemeGroupVersion)
	if err != nil {
		t.Fatal(err)
	}
	cr := &kubevirtv1.KubeVirt{
		TypeMeta:   metav1.TypeMeta{APIVersion: kubevirtv1.SchemeGroupVersion.String(), Kind: "KubeVirt"},
		ObjectMeta: metav1.ObjectMeta{Name: "kubevirt", Namespace: KubeVirtNamespace},
		Spec: kubevirtv1.KubeVirtSpec{Configuration: kubevirtv1.KubeVirtConfiguration{
			DeveloperConfiguration: &kubevirtv1.DeveloperConfiguration{
				UseEmulation: true,
				FeatureGates: append(append([]string{}, baseGates...), gates...),
				LogVerbosity: logVerbosity(),
			},
		}},
	}
	ctx := context.Background()
	out := &kubevirtv1.KubeVirt{}
	if err := kv.Post().Namespace(KubeVirtNamespace).Resource("kubevirts").Body(cr).Do(ctx).Into(out); err != nil {
		t.Fatalf("create the KubeVirt CR: %v", err)
	}
	// What virt-operator reports once it deployed KubeVirt, as far as
	// virt-api and virt-controller read it: the phase, the version and the
	// default architecture of new instances (the nodes' own).
	out.Status.Phase = kubevirtv1.KubeVirtPhaseDeployed
	out.Status.ObservedKubeVirtVersion, out.Status.TargetKubeVirtVersion = "v1.8.0", "v1.8.0"
	out.Status.DefaultArchitecture = "amd64"
	if err := kv.Put().Namespace(KubeVirtNamespace).Resource("kubevirts").Name(out.Name).SubResource("status").Body(out).Do(ctx).Error(); err != nil {
		t.Fatalf("KubeVirt CR status: %v", err)
	}
}

// logVerbosity is BMLAB_KUBEVIRT_VERBOSITY (virt-api's and
// virt-controller's log level, for debugging a test), else KubeVirt's
// default.
func logVerbosity() *kubevirtv1.LogVerbosity {
	v, err := strconv.Atoi(os.Getenv("BMLAB_KUBEVIRT_VERBOSITY"))
	if err != nil {
		return nil
	}
	return &kubevirtv1.LogVerbosity{VirtAPI: uint(v), VirtController: uint(v)}
}

// waitReady waits until kube-apiserver reports the APIService available
// (its discovery call reached virt-api through the aggregation layer),
// a VirtualMachine passes the webhooks (a dry-run create) and
// virt-controller holds its lease.
func (cp *controlPlane) waitReady(t testing.TB, api *kubetest.Server) {
	t.Helper()
	dc, err := dynamic.NewForConfig(api.RestConfig())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	apisvc := schema.GroupVersionResource{Group: "apiregistration.k8s.io", Version: "v1", Resource: "apiservices"}
	var why string
	available := func() bool {
		u, err := dc.Resource(apisvc).Get(ctx, "v1.subresources.kubevirt.io", metav1.GetOptions{})
		if err != nil {
			why = err.Error()
			return false
		}
		conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
		for _, c := range conds {
			if m, _ := c.(map[string]any); m["type"] == "Available" {
				why = fmt.Sprint(m["reason"], ": ", m["message"])
				return m["status"] == "True"
			}
		}
		return false
	}
	cp.waitFor(t, "the APIService v1.subresources.kubevirt.io to be available", 2*time.Minute, available, &why)

	kv, err := kubevirt.NewRESTClient(api.RestConfig(), kubevirtv1.SchemeGroupVersion)
	if err != nil {
		t.Fatal(err)
	}
	halted := kubevirtv1.RunStrategyHalted
	probe := &kubevirtv1.VirtualMachine{
		TypeMeta:   metav1.TypeMeta{APIVersion: kubevirtv1.SchemeGroupVersion.String(), Kind: "VirtualMachine"},
		ObjectMeta: metav1.ObjectMeta{Name: "probe", Namespace: "default"},
		Spec: kubevirtv1.VirtualMachineSpec{RunStrategy: &halted, Template: &kubevirtv1.VirtualMachineInstanceTemplateSpec{
			Spec: kubevirtv1.VirtualMachineInstanceSpec{Domain: kubevirtv1.DomainSpec{}},
		}},
	}
	admitted := func() bool {
		err := kv.Post().Namespace("default").Resource("virtualmachines").Param("dryRun", "All").Body(probe).Do(ctx).Error()
		if err != nil {
			why = err.Error()
		}
		return err == nil
	}
	cp.waitFor(t, "virt-api's webhooks to admit a VirtualMachine", time.Minute, admitted, &why)

	cs := api.Clientset(t)
	leads := func() bool {
		l, err := cs.CoordinationV1().Leases(KubeVirtNamespace).Get(ctx, "virt-controller", metav1.GetOptions{})
		if err != nil {
			why = err.Error()
			return false
		}
		why = "no holder"
		return l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity != ""
	}
	cp.waitFor(t, "virt-controller to take its lease", time.Minute, leads, &why)
}

func (cp *controlPlane) waitFor(t testing.TB, what string, timeout time.Duration, cond func() bool, why *string) {
	t.Helper()
	if testenv.WaitFor(timeout, cond) {
		return
	}
	for _, c := range cp.procs {
		if c.ProcessState != nil {
			*why += fmt.Sprintf("; %s exited: %v", filepath.Base(c.Path), c.ProcessState)
		}
	}
	var logs []string
	for name, p := range cp.logs {
		logs = append(logs, fmt.Sprintf("%s (%s):\n%s", name, p, tail(p, 20)))
	}
	t.Fatalf("waited %s for %s: %s\n%s", timeout, what, *why, strings.Join(logs, "\n"))
}
