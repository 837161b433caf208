package upi

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	"sigs.k8s.io/yaml"

	"github.com/bmlab/bmlab/internal/installertest"
)

const testApproverImage = "quay.io/openshift-release-dev/ocp-v4.0-art-dev@sha256:cli"

// TestAddedManifestsGolden pins the IngressController and the CSR approver
// for a compact cluster (routers on the masters) and one with workers.
func TestAddedManifestsGolden(t *testing.T) {
	for _, workers := range []int{0, 2} {
		ms, err := AddedManifests(testCluster(workers), ManifestOptions{ApproverImage: testApproverImage})
		if err != nil {
			t.Fatal(err)
		}
		var all strings.Builder
		for _, m := range ms {
			all.WriteString("# " + m.Name + "\n")
			all.Write(m.Data)
			all.WriteString("---\n")
		}
		golden(t, filepath.Join("manifests", "added-"+strconv.Itoa(workers)+"-workers.yaml"), []byte(all.String()))
	}
}

func TestIngressControllerPlacement(t *testing.T) {
	for _, tc := range []struct {
		workers  int
		replicas int32
		label    string
		tolerate bool
	}{
		{0, 3, "node-role.kubernetes.io/master", true},
		{1, 1, "node-role.kubernetes.io/worker", false},
		{4, 4, "node-role.kubernetes.io/worker", false},
	} {
		b, err := IngressController(testCluster(tc.workers))
		if err != nil {
			t.Fatal(err)
		}
		var ic ingressController
		if err := yaml.UnmarshalStrict(b, &ic); err != nil {
			t.Fatal(err)
		}
		if ic.Spec.Replicas != tc.replicas {
			t.Errorf("%d workers: replicas %d, want %d", tc.workers, ic.Spec.Replicas, tc.replicas)
		}
		if diff := cmp.Diff(map[string]string{tc.label: ""}, ic.Spec.NodePlacement.NodeSelector.MatchLabels); diff != "" {
			t.Errorf("%d workers: node selector (-want +got):\n%s", tc.workers, diff)
		}
		if got := len(ic.Spec.NodePlacement.Tolerations) > 0; got != tc.tolerate {
			t.Errorf("%d workers: tolerations %v", tc.workers, ic.Spec.NodePlacement.Tolerations)
		}
		if ic.Kind != "IngressController" || ic.APIVersion != "operator.openshift.io/v1" ||
			ic.Metadata.Name != "default" || ic.Metadata.Namespace != "openshift-ingress-operator" {
			t.Errorf("object %s %s %s/%s", ic.APIVersion, ic.Kind, ic.Metadata.Namespace, ic.Metadata.Name)
		}
	}
	if _, err := IngressController(Cluster{}); err == nil || !strings.Contains(err.Error(), "neither masters nor workers") {
		t.Errorf("empty cluster: %v", err)
	}
	if _, err := CSRApprover("", []string{"n"}); err == nil || !strings.Contains(err.Error(), "no image") {
		t.Errorf("no approver image: %v", err)
	}
}

func TestIsMachineManifest(t *testing.T) {
	machine := "apiVersion: machine.openshift.io/v1beta1\nkind: Machine\nmetadata:\n  name: m\n"
	set := "apiVersion: machine.openshift.io/v1beta1\nkind: MachineSet\nmetadata:\n  name: s\n"
	cpms := "apiVersion: machine.openshift.io/v1\nkind: ControlPlaneMachineSet\n"
	cm := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\n"
	for _, tc := range []struct {
		name, data string
		want       bool
		err        string
	}{
		{"machine", machine, true, ""},
		{"machineset", set, true, ""},
		{"cpms", cpms, true, ""},
		{"capi machine", "apiVersion: cluster.x-k8s.io/v1beta1\nkind: Machine\n", true, ""},
		{"several machines", "---\n" + machine + "---\n" + machine + "\n---\n", true, ""},
		{"configmap", cm, false, ""},
		{"kind Machine of another group", "apiVersion: example.com/v1\nkind: Machine\n", false, ""},
		{"machine config", "apiVersion: machineconfiguration.openshift.io/v1\nkind: MachineConfig\n", false, ""},
		{"empty", "", false, ""},
		{"mixed", machine + "---\n" + cm, false, "1 machine objects mixed with 1 others"},
		{"bad yaml", "kind: [", false, "document 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := IsMachineManifest([]byte(tc.data))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

func TestSetMastersSchedulable(t *testing.T) {
	const sched = "apiVersion: config.openshift.io/v1\nkind: Scheduler\nmetadata:\n  name: cluster\nspec:\n  mastersSchedulable: false\n  policy:\n    name: \"\"\n  profile: HighNodeUtilization\nstatus: {}\n"
	got, err := SetMastersSchedulable([]byte(sched), false)
	if err != nil || string(got) != sched {
		t.Errorf("already false: %q, %v; want the same bytes", got, err)
	}
	got, err = SetMastersSchedulable([]byte(sched), true)
	if err != nil {
		t.Fatal(err)
	}
	want := "apiVersion: config.openshift.io/v1\nkind: Scheduler\nmetadata:\n  name: cluster\nspec:\n  mastersSchedulable: true\n  policy:\n    name: \"\"\n  profile: HighNodeUtilization\nstatus: {}\n"
	if diff := cmp.Diff(want, string(got)); diff != "" {
		t.Errorf("set true (-want +got):\n%s", diff)
	}
	if _, err := SetMastersSchedulable([]byte("apiVersion: v1\nkind: ConfigMap\n"), true); err == nil || !strings.Contains(err.Error(), "want a config.openshift.io Scheduler") {
		t.Errorf("not a scheduler: %v", err)
	}
}

// manifestsDir writes the fixture installer's manifests for a cluster with
// workers workers into a new directory.
func manifestsDir(t *testing.T, workers int) string {
	t.Helper()
	ic, err := installertest.ParseInstallConfig([]byte("baseDomain: lab.test\nmetadata:\n  name: hyb\npullSecret: '{}'\ncompute:\n- name: worker\n  replicas: " + strconv.Itoa(workers) + "\n"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for name, data := range installertest.Manifests(ic) {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// snapshot is every file under dir by relative path.
func snapshot(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		rel, _ := filepath.Rel(dir, p)
		out[rel] = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestEditManifests edits the fixture installer's manifests: the machine
// manifests go, the scheduler follows the workers, the added manifests
// appear, nothing else changes, and a second run changes nothing.
func TestEditManifests(t *testing.T) {
	opts := ManifestOptions{ApproverImage: testApproverImage}
	approver := []string{
		"openshift/99_bmlab-csr-approver-0-namespace.yaml",
		"openshift/99_bmlab-csr-approver-1-serviceaccount.yaml",
		"openshift/99_bmlab-csr-approver-2-clusterrole.yaml",
		"openshift/99_bmlab-csr-approver-3-clusterrolebinding.yaml",
		"openshift/99_bmlab-csr-approver-4-cronjob.yaml",
	}
	machines := []string{
		"openshift/99_openshift-cluster-api_master-machines-0.yaml",
		"openshift/99_openshift-cluster-api_master-machines-1.yaml",
		"openshift/99_openshift-cluster-api_master-machines-2.yaml",
		"openshift/99_openshift-cluster-api_worker-machineset-0.yaml",
		"openshift/99_openshift-machine-api_master-control-plane-machine-set.yaml",
	}
	for _, tc := range []struct {
		workers     int
		schedulable bool
		// installerSchedulable is what the fixture (like the installer)
		// already wrote: the scheduler changes only when it differs.
		installerSchedulable bool
	}{
		{workers: 0, schedulable: true, installerSchedulable: true},
		{workers: 2, schedulable: false, installerSchedulable: false},
	} {
		t.Run(strconv.Itoa(tc.workers)+" workers", func(t *testing.T) {
			c := testCluster(tc.workers)
			dir := manifestsDir(t, tc.workers)
			before := snapshot(t, dir)
			changed, err := EditManifests(dir, c, opts)
			if err != nil {
				t.Fatal(err)
			}
			want := append(append([]string{IngressControllerManifest}, approver...), machines...)
			if diff := cmp.Diff(want, changed, sortStrings); diff != "" {
				t.Errorf("changed files (-want +got):\n%s", diff)
			}
			after := snapshot(t, dir)
			for name, data := range before {
				if changedSet(changed)[name] {
					continue
				}
				if after[name] != data {
					t.Errorf("%s changed", name)
				}
			}
			for _, m := range machines {
				if _, ok := after[m]; ok {
					t.Errorf("%s still there", m)
				}
			}
			if !strings.Contains(after[SchedulerManifest], "mastersSchedulable: "+strconv.FormatBool(tc.schedulable)+"\n") {
				t.Errorf("scheduler: %s", after[SchedulerManifest])
			}
			again, err := EditManifests(dir, c, opts)
			if err != nil {
				t.Fatal(err)
			}
			if len(again) != 0 {
				t.Errorf("second run changed %v", again)
			}
			if diff := cmp.Diff(after, snapshot(t, dir)); diff != "" {
				t.Errorf("second run changed the directory:\n%s", diff)
			}
		})
	}
	t.Run("scheduler disagrees with the workers", func(t *testing.T) {
		dir := manifestsDir(t, 2) // the installer wrote false
		changed, err := EditManifests(dir, testCluster(0), opts)
		if err != nil {
			t.Fatal(err)
		}
		if !changedSet(changed)[SchedulerManifest] {
			t.Errorf("scheduler not among %v", changed)
		}
		b, _ := os.ReadFile(filepath.Join(dir, SchedulerManifest))
		golden(t, filepath.Join("manifests", "cluster-scheduler-02-config.yml"), b)
	})
	t.Run("no manifests", func(t *testing.T) {
		_, err := EditManifests(t.TempDir(), testCluster(0), opts)
		if err == nil || !strings.Contains(err.Error(), "openshift-install create manifests") {
			t.Errorf("error %v", err)
		}
	})
}

func changedSet(names []string) map[string]bool {
	m := map[string]bool{}
	for _, n := range names {
		m[n] = true
	}
	return m
}

// TestCSRApproverApprovesOnlyTheLabsNodes runs the approver's script (the
// CronJob's command and environment, as generated) in sh, with an oc that
// serves real CSRs from files: the lab's nodes' pending CSRs are approved
// (a first client certificate from the node-bootstrapper, a serving one
// from the node), another cluster's node's, a node's CSR requested by
// someone else, one already decided and one for no node are not.
func TestCSRApproverApprovesOnlyTheLabsNodes(t *testing.T) {
	ms, err := CSRApprover(testApproverImage, []string{"ocp-master-0", "ocp-worker-0"})
	if err != nil {
		t.Fatal(err)
	}
	var job batchv1.CronJob
	if err := yaml.Unmarshal(ms[len(ms)-1].Data, &job); err != nil {
		t.Fatal(err)
	}
	ctr := job.Spec.JobTemplate.Spec.Template.Spec.Containers[0]
	dir := t.TempDir()
	const bootstrapper = "system:serviceaccount:openshift-machine-config-operator:node-bootstrapper"
	csrs := []struct{ name, cn, user, status string }{
		{"csr-client-m0", "system:node:ocp-master-0", bootstrapper, ""},
		{"csr-serving-w0", "system:node:ocp-worker-0", "system:node:ocp-worker-0", ""},
		{"csr-other-lab", "system:node:other-master-0", bootstrapper, ""},
		{"csr-spoofed", "system:node:ocp-worker-0", "system:node:other-master-0", ""},
		{"csr-denied", "system:node:ocp-master-0", bootstrapper, "Denied"},
		{"csr-no-node", "some-user", "some-user", ""},
		// A name the lab's is a prefix of.
		{"csr-prefix", "system:node:ocp-master-00", bootstrapper, ""},
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	var pending []string
	for _, c := range csrs {
		der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{Subject: pkix.Name{CommonName: c.cn, Organization: []string{"system:nodes"}}}, key)
		if err != nil {
			t.Fatal(err)
		}
		pemReq := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der})
		must := func(err error) {
			if err != nil {
				t.Fatal(err)
			}
		}
		must(os.WriteFile(filepath.Join(dir, c.name+".request"), []byte(base64.StdEncoding.EncodeToString(pemReq)), 0o644))
		must(os.WriteFile(filepath.Join(dir, c.name+".username"), []byte(c.user), 0o644))
		if c.status == "" {
			pending = append(pending, c.name)
		}
	}
	// oc as the script calls it: the pending list, one CSR's field, approve.
	oc := `#!/bin/sh
d=` + dir + `
case "$*" in
"get csr -o go-template="*) printf '%s\n' ` + strings.Join(pending, " ") + ` ;;
"get csr "*" -o jsonpath={.spec.request}") cat "$d/$3.request" ;;
"get csr "*" -o jsonpath={.spec.username}") cat "$d/$3.username" ;;
"adm certificate approve "*) echo "$4" >>"$d/approved" ;;
*) echo "fake oc: $*" >&2; exit 2 ;;
esac
`
	bin := filepath.Join(dir, "bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bin, "oc"), []byte(oc), 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(ctr.Command[0], ctr.Command[1:]...)
	cmd.Env = []string{"PATH=" + bin + ":/usr/bin:/bin"}
	for _, e := range ctr.Env {
		cmd.Env = append(cmd.Env, e.Name+"="+e.Value)
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the approver's script: %v\n%s", err, out)
	}
	approved, _ := os.ReadFile(filepath.Join(dir, "approved"))
	if got := strings.Fields(string(approved)); !slices.Equal(got, []string{"csr-client-m0", "csr-serving-w0"}) {
		t.Errorf("approved %q, want the lab's nodes' two; the script said:\n%s", got, out)
	}
	for _, want := range []string{"left csr-other-lab alone: it names none of this cluster's nodes",
		"left csr-spoofed alone: node ocp-worker-0, but requested by system:node:other-master-0",
		"left csr-prefix alone: it names none of this cluster's nodes",
		"left csr-no-node alone: it names none of this cluster's nodes"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the script's output lacks %q:\n%s", want, out)
		}
	}
	if _, err := CSRApprover(testApproverImage, nil); err == nil || !strings.Contains(err.Error(), "no nodes") {
		t.Errorf("no nodes: %v", err)
	}
}
