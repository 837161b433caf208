package kubevirt_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/bmlab/bmlab/internal/kubevirt"
	"github.com/bmlab/bmlab/internal/kubevirt/kubetest"
	"github.com/bmlab/bmlab/internal/kubevirt/kubevirttest"
	"github.com/bmlab/bmlab/internal/machine"
	"github.com/bmlab/bmlab/internal/testenv"
)

// TestRunningAtStart: VMs that run when the backend starts read On, and
// are found by UUID and by <namespace>.<name>, whichever of the two
// informers (VMs, instances) lists first. Objects only, no fixture: the
// instances' status is written as virt-handler would.
func TestRunningAtStart(t *testing.T) {
	api := kubetest.Start(t)
	kubevirttest.InstallCRDs(t, api)
	kv, err := kubevirt.NewRESTClient(api.RestConfig(), kubevirtv1.SchemeGroupVersion)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	const n = 40
	always := kubevirtv1.RunStrategyAlways
	for i := range n {
		name := fmt.Sprintf("vm-%02d", i)
		spec := kubevirtv1.VirtualMachineInstanceSpec{Domain: kubevirtv1.DomainSpec{
			Resources: kubevirtv1.ResourceRequirements{Requests: corev1.ResourceList{"memory": resource.MustParse("128Mi")}},
		}}
		vm := &kubevirtv1.VirtualMachine{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
			Spec:       kubevirtv1.VirtualMachineSpec{RunStrategy: &always, Template: &kubevirtv1.VirtualMachineInstanceTemplateSpec{Spec: spec}},
		}
		vmi := &kubevirtv1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}, Spec: spec}
		if err := kv.Post().Namespace("default").Resource("virtualmachines").Body(vm).Do(ctx).Error(); err != nil {
			t.Fatal(err)
		}
		created := &kubevirtv1.VirtualMachineInstance{}
		if err := kv.Post().Namespace("default").Resource("virtualmachineinstances").Body(vmi).Do(ctx).Into(created); err != nil {
			t.Fatal(err)
		}
		created.Status.Phase = kubevirtv1.Running
		if err := kv.Put().Namespace("default").Resource("virtualmachineinstances").Name(name).Body(created).Do(ctx).Error(); err != nil {
			t.Fatal(err)
		}
	}
	for try := range 3 { // each start races the two informers anew
		func() {
			rctx, cancel := context.WithCancel(ctx)
			defer cancel()
			be, err := kubevirt.New(kubevirt.Config{Rest: api.RestConfig()}, testenv.Logger(t))
			if err != nil {
				t.Fatal(err)
			}
			if err := be.Run(rctx, 30*time.Second); err != nil {
				t.Fatal(err)
			}
			for i := range n {
				name := fmt.Sprintf("default.vm-%02d", i)
				m, err := be.Get(name)
				if err != nil {
					t.Fatalf("start %d: %s: %v", try, name, err)
				}
				if m.Power != machine.PowerOn {
					t.Fatalf("start %d: %s reads %s, want On (its instance runs)", try, name, m.Power)
				}
				if byID, err := be.Get(m.ID); err != nil || byID != m {
					t.Fatalf("start %d: %s by UUID %s: %v", try, name, m.ID, err)
				}
			}
		}()
	}
}
