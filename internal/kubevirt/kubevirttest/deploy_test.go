package kubevirttest

import (
	"slices"
	"testing"

	"github.com/bmlab/bmlab/internal/kubevirt/kubetest"
)

// TestDeployManifests: contrib/kubevirt/vbmcd.yaml passes a real
// kube-apiserver's server-side dry-run (strict field validation), with
// KubeVirt's CRDs installed so the Role's groups exist. (The e2e tests in
// internal/vbmcd run vbmcd with the manifest's ServiceAccount and roles.)
func TestDeployManifests(t *testing.T) {
	api := kubetest.Start(t)
	InstallCRDs(t, api)
	api.EnsureNamespace(t, "lab")
	got := DryRun(t, api, ManifestPath())
	want := []string{"ServiceAccount/vbmcd", "Role/vbmcd", "RoleBinding/vbmcd", "ClusterRole/vbmcd-kubevirt-config",
		"ClusterRoleBinding/vbmcd-kubevirt-config", "Deployment/vbmcd", "Service/vbmcd"}
	if !slices.Equal(got, want) {
		t.Errorf("dry-run objects %v, want %v", got, want)
	}
}
