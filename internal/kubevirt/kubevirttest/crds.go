package kubevirttest

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/bmlab/bmlab/internal/kubevirt/kubetest"
	"github.com/bmlab/bmlab/internal/testenv"
)

var crdGVR = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// InstallCRDs creates KubeVirt's CustomResourceDefinitions
// (testdata/kubevirt-crds.yaml: every one virt-operator installs, made by
// KubeVirt v1.8.0's operator code) and CDI's (testdata/cdi-crds.yaml, made
// by controller-gen from CDI's API types) and waits until they are
// established.
func InstallCRDs(t testing.TB, api *kubetest.Server) {
	t.Helper()
	dc, err := dynamic.NewForConfig(api.RestConfig())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var names []string
	for _, f := range []string{"kubevirt-crds.yaml", "cdi-crds.yaml"} {
		for _, u := range manifestObjects(t, filepath.Join(testenv.RepoRoot(), "internal", "kubevirt", "testdata", f)) {
			if u.GetKind() != "CustomResourceDefinition" {
				continue
			}
			if _, err := dc.Resource(crdGVR).Create(ctx, u, metav1.CreateOptions{}); err != nil {
				t.Fatalf("create CRD %s: %v", u.GetName(), err)
			}
			names = append(names, u.GetName())
		}
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
