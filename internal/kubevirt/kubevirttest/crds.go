package kubevirttest

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"

	"github.com/bmlab/bmlab/internal/kubevirt/kubetest"
	"github.com/bmlab/bmlab/internal/testenv"
)

var crdGVR = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// InstallCRDs creates KubeVirt's VirtualMachine and VirtualMachineInstance
// CustomResourceDefinitions (testdata/kubevirt-crds.yaml, generated from
// KubeVirt v1.8.0's operator code) and waits until they are established.
func InstallCRDs(t testing.TB, api *kubetest.Server) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "internal", "kubevirt", "testdata", "kubevirt-crds.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	dc, err := dynamic.NewForConfig(api.RestConfig())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var names []string
	for _, doc := range bytes.Split(raw, []byte("\n---\n")) {
		var obj map[string]any
		if err := yaml.Unmarshal(doc, &obj); err != nil {
			t.Fatal(err)
		}
		if obj["kind"] != "CustomResourceDefinition" {
			continue
		}
		u := &unstructured.Unstructured{Object: obj}
		if _, err := dc.Resource(crdGVR).Create(ctx, u, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create CRD %s: %v", u.GetName(), err)
		}
		names = append(names, u.GetName())
	}
	for _, name := range names {
		ok := testenv.WaitFor(30*time.Second, func() bool {
			u, err := dc.Resource(crdGVR).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false
			}
			conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
			for _, c := range conds {
				if m, _ := c.(map[string]any); m["type"] == "Established" && m["status"] == "True" {
					return true
				}
			}
			return false
		})
		if !ok {
			t.Fatalf("CRD %s not established within 30 s", name)
		}
	}
}

// DryRun sends every object of a YAML stream to the API server as a
// server-side dry-run create: validated, admitted, not stored.
func DryRun(t testing.TB, api *kubetest.Server, path string) []string {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	dc, err := dynamic.NewForConfig(api.RestConfig())
	if err != nil {
		t.Fatal(err)
	}
	resources := map[string]schema.GroupVersionResource{
		"ServiceAccount": {Version: "v1", Resource: "serviceaccounts"},
		"Service":        {Version: "v1", Resource: "services"},
		"Role":           {Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "roles"},
		"RoleBinding":    {Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "rolebindings"},
		"Deployment":     {Group: "apps", Version: "v1", Resource: "deployments"},
	}
	var done []string
	for _, doc := range bytes.Split(raw, []byte("\n---\n")) {
		var obj map[string]any
		if err := yaml.Unmarshal(doc, &obj); err != nil {
			t.Fatal(err)
		}
		if obj == nil {
			continue
		}
		u := &unstructured.Unstructured{Object: obj}
		gvr, ok := resources[u.GetKind()]
		if !ok {
			t.Fatalf("%s: kind %s unknown to the dry-run", path, u.GetKind())
		}
		_, err := dc.Resource(gvr).Namespace(u.GetNamespace()).Create(context.Background(), u, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}, FieldValidation: "Strict"})
		if err != nil {
			t.Errorf("server-side dry-run of %s %s: %v", u.GetKind(), u.GetName(), err)
		}
		done = append(done, u.GetKind()+"/"+u.GetName())
	}
	return done
}
