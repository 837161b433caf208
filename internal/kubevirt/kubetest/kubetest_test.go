package kubetest_test

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/bmlab/bmlab/internal/kubevirt/kubetest"
)

// TestStart starts etcd and kube-apiserver and reads the default namespace
// through TLS and the token.
func TestStart(t *testing.T) {
	s := kubetest.Start(t)
	cs, err := kubernetes.NewForConfig(s.RestConfig())
	if err != nil {
		t.Fatal(err)
	}
	ns, err := cs.CoreV1().Namespaces().Get(context.Background(), "default", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get namespace default: %v\n%s", err, s.Log())
	}
	if ns.Name != "default" {
		t.Fatalf("got namespace %q", ns.Name)
	}
}
