package kubevirttest

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"

	"github.com/bmlab/bmlab/internal/kubevirt/kubetest"
	"github.com/bmlab/bmlab/internal/testenv"
)

// ManifestPath is vbmcd's deployment in a cluster.
func ManifestPath() string {
	return filepath.Join(testenv.RepoRoot(), "contrib", "kubevirt", "vbmcd.yaml")
}

// kinds are the resources of the kinds vbmcd.yaml and
// testdata/kubevirt-control-plane.yaml hold.
var kinds = map[string]schema.GroupVersionResource{
	"ServiceAccount":                 {Version: "v1", Resource: "serviceaccounts"},
	"Service":                        {Version: "v1", Resource: "services"},
	"Role":                           {Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "roles"},
	"RoleBinding":                    {Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "rolebindings"},
	"ClusterRole":                    {Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterroles"},
	"ClusterRoleBinding":             {Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterrolebindings"},
	"Deployment":                     {Group: "apps", Version: "v1", Resource: "deployments"},
	"APIService":                     {Group: "apiregistration.k8s.io", Version: "v1", Resource: "apiservices"},
	"ValidatingWebhookConfiguration": {Group: "admissionregistration.k8s.io", Version: "v1", Resource: "validatingwebhookconfigurations"},
	"MutatingWebhookConfiguration":   {Group: "admissionregistration.k8s.io", Version: "v1", Resource: "mutatingwebhookconfigurations"},
}

// manifestObjects reads a YAML stream of objects.
func manifestObjects(t testing.TB, path string) []*unstructured.Unstructured {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []*unstructured.Unstructured
	for _, doc := range bytes.Split(raw, []byte("\n---\n")) {
		var obj map[string]any
		if err := yaml.Unmarshal(doc, &obj); err != nil {
			t.Fatal(err)
		}
		if obj != nil {
			out = append(out, &unstructured.Unstructured{Object: obj})
		}
	}
	return out
}

// VBMCDKubeconfig deploys vbmcd's identity from contrib/kubevirt/vbmcd.yaml
// into the cluster (its ServiceAccount, Role, RoleBinding, ClusterRole and
// ClusterRoleBinding, as kubectl apply would, again when called again; the
// manifest's namespace "lab" is the fixture's) and returns a kubeconfig that authenticates as
// that ServiceAccount (a token the API server issued for it), for vbmcd
// to run with. edit, when given, changes the Role first (a test takes a
// verb away).
func (f *Fixture) VBMCDKubeconfig(t testing.TB, edit func(rules []any) []any) string {
	t.Helper()
	dc, err := dynamic.NewForConfig(f.API.RestConfig())
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range manifestObjects(t, ManifestPath()) {
		kind := u.GetKind()
		if kind == "Deployment" || kind == "Service" {
			continue // vbmcd runs in the test's process
		}
		if u.GetNamespace() != "" {
			u.SetNamespace(f.Namespace)
		}
		if kind == "RoleBinding" || kind == "ClusterRoleBinding" {
			subjects, _, _ := unstructured.NestedSlice(u.Object, "subjects")
			for _, s := range subjects {
				s.(map[string]any)["namespace"] = f.Namespace
			}
			_ = unstructured.SetNestedSlice(u.Object, subjects, "subjects")
		}
		if kind == "Role" && edit != nil {
			rules, _, _ := unstructured.NestedSlice(u.Object, "rules")
			_ = unstructured.SetNestedSlice(u.Object, edit(rules), "rules")
		}
		var res dynamic.ResourceInterface = dc.Resource(kinds[kind])
		if ns := u.GetNamespace(); ns != "" {
			res = dc.Resource(kinds[kind]).Namespace(ns)
		}
		ctx := context.Background()
		_, err = res.Create(ctx, u, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) { // applied again: replaced
			var cur *unstructured.Unstructured
			if cur, err = res.Get(ctx, u.GetName(), metav1.GetOptions{}); err == nil {
				u.SetResourceVersion(cur.GetResourceVersion())
				_, err = res.Update(ctx, u, metav1.UpdateOptions{})
			}
		}
		if err != nil {
			t.Fatalf("apply %s %s from vbmcd.yaml: %v", kind, u.GetName(), err)
		}
	}
	return f.API.ServiceAccountKubeconfig(t, f.Namespace, "vbmcd")
}

// WithoutVerb returns a Role edit that takes verb away from the rule on
// resource (as vbmcd.yaml spells it), failing the test when no rule has
// it.
func WithoutVerb(t testing.TB, resource, verb string) func([]any) []any {
	return func(rules []any) []any {
		found := false
		var out []any
		for _, r := range rules {
			rule := r.(map[string]any)
			res, _, _ := unstructured.NestedStringSlice(rule, "resources")
			verbs, _, _ := unstructured.NestedStringSlice(rule, "verbs")
			has := false
			for _, x := range res {
				has = has || x == resource
			}
			if !has {
				continue
			}
			var kept []any
			for _, v := range verbs {
				if v == verb {
					found = true
					continue
				}
				kept = append(kept, v)
			}
			rule["verbs"] = kept
		}
		for _, r := range rules {
			if v, _, _ := unstructured.NestedSlice(r.(map[string]any), "verbs"); len(v) > 0 {
				out = append(out, r) // a rule left without verbs goes
			}
		}
		if !found {
			t.Fatalf("vbmcd.yaml's Role has no rule giving %s on %s", verb, resource)
		}
		return out
	}
}

// DryRun sends every object of a YAML stream to the API server as a
// server-side dry-run create: validated, admitted, not stored.
func DryRun(t testing.TB, api *kubetest.Server, path string) []string {
	t.Helper()
	dc, err := dynamic.NewForConfig(api.RestConfig())
	if err != nil {
		t.Fatal(err)
	}
	var done []string
	for _, u := range manifestObjects(t, path) {
		gvr, ok := kinds[u.GetKind()]
		if !ok {
			t.Fatalf("%s: kind %s unknown to the dry-run", path, u.GetKind())
		}
		res := dc.Resource(gvr)
		opts := metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}, FieldValidation: "Strict"}
		if ns := u.GetNamespace(); ns != "" {
			_, err = res.Namespace(ns).Create(context.Background(), u, opts)
		} else {
			_, err = res.Create(context.Background(), u, opts)
		}
		if err != nil {
			t.Errorf("server-side dry-run of %s %s: %v", u.GetKind(), u.GetName(), err)
		}
		done = append(done, u.GetKind()+"/"+u.GetName())
	}
	return done
}
