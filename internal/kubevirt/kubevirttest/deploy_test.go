package kubevirttest

import (
	"context"
	"path/filepath"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/bmlab/bmlab/internal/kubevirt/kubetest"
	"github.com/bmlab/bmlab/internal/testenv"
)

// TestDeployManifests: contrib/kubevirt/vbmcd.yaml passes a real
// kube-apiserver's server-side dry-run (strict field validation), with
// KubeVirt's CRDs installed so the Role's groups exist.
func TestDeployManifests(t *testing.T) {
	api := kubetest.Start(t)
	InstallCRDs(t, api)
	cs, err := kubernetes.NewForConfig(api.RestConfig())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "lab"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	got := DryRun(t, api, filepath.Join(testenv.RepoRoot(), "contrib", "kubevirt", "vbmcd.yaml"))
	want := []string{"ServiceAccount/vbmcd", "Role/vbmcd", "RoleBinding/vbmcd", "Deployment/vbmcd", "Service/vbmcd"}
	if !slices.Equal(got, want) {
		t.Errorf("dry-run objects %v, want %v", got, want)
	}
}
