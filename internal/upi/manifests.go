package upi

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/bmlab/bmlab/internal/ocp"
	"github.com/bmlab/bmlab/internal/yamljson"
)

// Manifest paths, relative to the installer's directory.
const (
	SchedulerManifest         = "manifests/cluster-scheduler-02-config.yml"
	IngressControllerManifest = "manifests/cluster-ingress-default-ingresscontroller.yaml"
	// CSRApproverPrefix starts the names of the CSR approver's manifests.
	CSRApproverPrefix = "openshift/99_bmlab-csr-approver-"
)

// CSR approver objects.
const (
	CSRApproverNamespace = "bmlab-csr-approver"
	CSRApproverName      = "csr-approver"
)

// Node role labels the kubelet of an OpenShift node carries.
const (
	masterLabel = "node-role.kubernetes.io/master"
	workerLabel = "node-role.kubernetes.io/worker"
)

// ManifestOptions are the manifests edits' settings beyond the cluster.
type ManifestOptions struct {
	// ApproverImage is the CSR approver's container image; it needs oc,
	// sh and xargs (the release payload's "cli" image has them).
	ApproverImage string
}

// Manifest is a manifest file, Name relative to the installer's directory.
type Manifest struct {
	Name string
	Data []byte
}

// manifestNodes returns c's nodes of role. (Unexported with names of
// their own: the static pods, written in parallel, have their own helpers.)
func manifestNodes(c Cluster, role string) []Node {
	var out []Node
	for _, n := range c.Nodes {
		if n.Role == role {
			out = append(out, n)
		}
	}
	return out
}

// ingressRouterNodes are the nodes the ingress routers run on: the
// workers, or the masters when there are none.
func ingressRouterNodes(c Cluster) []Node {
	if w := manifestNodes(c, ocp.RoleWorker); len(w) > 0 {
		return w
	}
	return manifestNodes(c, ocp.RoleMaster)
}

// EditManifests edits what `openshift-install create manifests` wrote in
// dir for the hybrid flow and returns the files it changed (relative to
// dir, sorted): it removes the Machine, MachineSet and
// ControlPlaneMachineSet manifests (found by their kind, in manifests/ and
// openshift/), sets spec.mastersSchedulable in the Scheduler config to
// whether the cluster has no workers, and writes the default
// IngressController and the CSR approver (AddedManifests). It is
// idempotent: a second run changes nothing and returns no file.
func EditManifests(dir string, c Cluster, o ManifestOptions) ([]string, error) {
	added, err := AddedManifests(c, o)
	if err != nil {
		return nil, err
	}
	var changed []string
	for _, sub := range []string{"manifests", "openshift"} {
		entries, err := os.ReadDir(filepath.Join(dir, sub))
		if err != nil {
			return nil, fmt.Errorf("manifests in %s: %w (run `openshift-install create manifests` first)", dir, err)
		}
		for _, e := range entries {
			ext := filepath.Ext(e.Name())
			if e.IsDir() || (ext != ".yaml" && ext != ".yml") {
				continue
			}
			name := sub + "/" + e.Name()
			p := filepath.Join(dir, name)
			data, err := os.ReadFile(p)
			if err != nil {
				return nil, fmt.Errorf("read %s: %w", p, err)
			}
			machine, err := IsMachineManifest(data)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", p, err)
			}
			if machine {
				if err := os.Remove(p); err != nil {
					return nil, fmt.Errorf("remove %s: %w", p, err)
				}
				changed = append(changed, name)
			}
		}
	}
	sp := filepath.Join(dir, SchedulerManifest)
	data, err := os.ReadFile(sp)
	if err != nil {
		return nil, fmt.Errorf("scheduler config: %w (run `openshift-install create manifests` first)", err)
	}
	edited, err := SetMastersSchedulable(data, len(manifestNodes(c, ocp.RoleWorker)) == 0)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", sp, err)
	}
	added = append(added, Manifest{Name: SchedulerManifest, Data: edited})
	for _, m := range added {
		p := filepath.Join(dir, m.Name)
		old, err := os.ReadFile(p)
		if err == nil && bytes.Equal(old, m.Data) {
			continue
		}
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("read %s: %w", p, err)
		}
		if err := os.WriteFile(p, m.Data, 0o640); err != nil {
			return nil, fmt.Errorf("write %s: %w", p, err)
		}
		changed = append(changed, m.Name)
	}
	slices.Sort(changed)
	return changed, nil
}

// machineKinds are the kinds the hybrid flow removes: it makes its
// machines itself, and the machine API must not try to (the installer's
// own Machine objects would stay Provisioning forever on platform none).
var machineKinds = map[string]bool{"Machine": true, "MachineSet": true, "ControlPlaneMachineSet": true}

// IsMachineManifest reports whether the manifest's documents are Machine,
// MachineSet or ControlPlaneMachineSet objects (machine.openshift.io or
// cluster.x-k8s.io). A file that mixes them with other kinds is an error,
// since removing it would drop the others.
func IsMachineManifest(data []byte) (bool, error) {
	var machines, others int
	for i, doc := range documents(data) {
		var tm typeMeta
		if err := yamljson.Unmarshal(doc, &tm); err != nil {
			return false, fmt.Errorf("document %d: %w", i+1, err)
		}
		group, _, _ := strings.Cut(tm.APIVersion, "/")
		if machineKinds[tm.Kind] && (group == "machine.openshift.io" || group == "cluster.x-k8s.io") {
			machines++
		} else if tm.Kind != "" {
			others++
		}
	}
	if machines > 0 && others > 0 {
		return false, fmt.Errorf("%d machine objects mixed with %d others in one file; split it so the machines can be removed alone", machines, others)
	}
	return machines > 0, nil
}

// documents splits a YAML stream at its "---" lines, dropping empty ones.
func documents(data []byte) [][]byte {
	var docs [][]byte
	var cur bytes.Buffer
	flush := func() {
		if len(bytes.TrimSpace(cur.Bytes())) > 0 {
			docs = append(docs, bytes.Clone(cur.Bytes()))
		}
		cur.Reset()
	}
	for _, line := range bytes.SplitAfter(data, []byte("\n")) {
		if t := bytes.TrimRight(line, " \t\r\n"); bytes.Equal(t, []byte("---")) || bytes.HasPrefix(t, []byte("--- ")) {
			flush()
			continue
		}
		cur.Write(line)
	}
	flush()
	return docs
}

// SetMastersSchedulable returns the Scheduler config (config.openshift.io/v1
// Scheduler "cluster") with spec.mastersSchedulable set to v, unchanged
// bytes when it already is. The edit goes through a generic map so that
// the installer's other fields stay.
func SetMastersSchedulable(data []byte, v bool) ([]byte, error) {
	var cur struct {
		typeMeta `json:",inline"`
		Spec     struct {
			MastersSchedulable *bool `json:"mastersSchedulable"`
		} `json:"spec"`
	}
	if err := yamljson.Unmarshal(data, &cur); err != nil {
		return nil, err
	}
	if cur.Kind != "Scheduler" || !strings.HasPrefix(cur.APIVersion, "config.openshift.io/") {
		return nil, fmt.Errorf("want a config.openshift.io Scheduler, found %s %s", cur.APIVersion, cur.Kind)
	}
	if cur.Spec.MastersSchedulable != nil && *cur.Spec.MastersSchedulable == v {
		return data, nil
	}
	var m map[string]any
	if err := yamljson.Unmarshal(data, &m); err != nil {
		return nil, err
	}
	spec, _ := m["spec"].(map[string]any)
	if spec == nil {
		spec = map[string]any{}
		m["spec"] = spec
	}
	spec["mastersSchedulable"] = v
	return yamljson.Marshal(m)
}

// ingressController is operator.openshift.io/v1 IngressController, the
// fields the hybrid flow sets (openshift/api operator/v1 types).
type ingressController struct {
	typeMeta `json:",inline"`
	Metadata objectMeta            `json:"metadata"`
	Spec     ingressControllerSpec `json:"spec"`
}

type ingressControllerSpec struct {
	Replicas                   int32                      `json:"replicas"`
	EndpointPublishingStrategy endpointPublishingStrategy `json:"endpointPublishingStrategy"`
	NodePlacement              nodePlacement              `json:"nodePlacement"`
}

type endpointPublishingStrategy struct {
	Type string `json:"type"`
}

type nodePlacement struct {
	NodeSelector *labelSelector `json:"nodeSelector,omitempty"`
	Tolerations  []toleration   `json:"tolerations,omitempty"`
}

// masterTolerations let a pod run on masters that keep their NoSchedule
// taint (masters are unschedulable when there are workers).
var masterTolerations = []toleration{
	{Key: masterLabel, Operator: "Exists", Effect: "NoSchedule"},
	{Key: "node-role.kubernetes.io/control-plane", Operator: "Exists", Effect: "NoSchedule"},
}

// IngressController is the default IngressController: one router per
// router node (the workers, else the masters), placed on those nodes, publishing on the host
// network (the ingress VIP, or the masters' haproxy, sends 80 and 443
// there).
func IngressController(c Cluster) ([]byte, error) {
	routers := ingressRouterNodes(c)
	if len(routers) == 0 {
		return nil, errors.New("the cluster has neither masters nor workers to run the routers")
	}
	placement := nodePlacement{NodeSelector: &labelSelector{MatchLabels: map[string]string{workerLabel: ""}}}
	if len(manifestNodes(c, ocp.RoleWorker)) == 0 {
		placement = nodePlacement{
			NodeSelector: &labelSelector{MatchLabels: map[string]string{masterLabel: ""}},
			Tolerations:  masterTolerations,
		}
	}
	return yamljson.Marshal(ingressController{
		typeMeta: typeMeta{APIVersion: "operator.openshift.io/v1", Kind: "IngressController"},
		Metadata: objectMeta{Name: "default", Namespace: "openshift-ingress-operator"},
		Spec: ingressControllerSpec{
			Replicas:                   int32(len(routers)),
			EndpointPublishingStrategy: endpointPublishingStrategy{Type: "HostNetwork"},
			NodePlacement:              placement,
		},
	})
}

// approveScript approves the pending CSRs (neither approved nor denied)
// of the cluster's own nodes, the way the OpenShift docs approve kubelets'
// CSRs by hand on user-provisioned clusters, and leaves every other one
// alone. A CSR's node is the common name it asks for, system:node:NAME:
// in the DER inside the PEM request the name is plain bytes after its
// length byte, so base64, sed and grep find it (no openssl), and the
// length byte keeps master-1 from matching master-10. Its requester must
// be the node itself or the machine-config operator's node-bootstrapper (a
// new kubelet's first client certificate). NODES is the list of names.
const approveScript = `set -u
der=$(mktemp)
trap 'rm -f "$der"' EXIT
for csr in $(oc get csr -o go-template='{{range .items}}{{if not .status}}{{.metadata.name}}{{"\n"}}{{end}}{{end}}'); do
  oc get csr "$csr" -o jsonpath='{.spec.request}' | base64 -d | sed '/-----/d' | base64 -d >"$der"
  node=""
  for n in $NODES; do
    cn="system:node:$n"
    if grep -a -q -F "$(printf "\\$(printf %o ${#cn})")$cn" "$der"; then node=$n; fi
  done
  user=$(oc get csr "$csr" -o jsonpath='{.spec.username}')
  if [ -z "$node" ]; then
    echo "left $csr alone: it names none of this cluster's nodes"
  elif [ "$user" = "system:node:$node" ] || [ "$user" = system:serviceaccount:openshift-machine-config-operator:node-bootstrapper ]; then
    oc adm certificate approve "$csr"
  else
    echo "left $csr alone: node $node, but requested by $user"
  fi
done
`

// CSRApprover returns the manifests of the CSR approver: its namespace,
// service account, a ClusterRole that may read CSRs and approve the
// kubelets' (client and serving signers), its binding, and a CronJob that
// runs every minute on a master and approves what is pending for the
// named nodes (approveScript), nothing else. A
// user-provisioned cluster has no machine-approver for nodes the machine
// API did not create; kcli runs the same kind of approver.
func CSRApprover(image string, nodes []string) ([]Manifest, error) {
	if image == "" {
		return nil, errors.New("CSR approver: no image (one with oc, e.g. the release's cli image)")
	}
	if len(nodes) == 0 {
		return nil, errors.New("CSR approver: no nodes to approve CSRs for")
	}
	meta := func(namespaced bool) objectMeta {
		m := objectMeta{Name: CSRApproverName, Labels: map[string]string{"app.kubernetes.io/managed-by": "bmlab"}}
		if namespaced {
			m.Namespace = CSRApproverNamespace
		}
		return m
	}
	ns := namespace{
		typeMeta: typeMeta{APIVersion: "v1", Kind: "Namespace"},
		Metadata: objectMeta{Name: CSRApproverNamespace, Labels: map[string]string{"app.kubernetes.io/managed-by": "bmlab"}},
	}
	sa := serviceAccount{typeMeta: typeMeta{APIVersion: "v1", Kind: "ServiceAccount"}, Metadata: meta(true)}
	role := clusterRole{
		typeMeta: typeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRole"},
		Metadata: meta(false),
		Rules: []policyRule{
			{APIGroups: []string{"certificates.k8s.io"}, Resources: []string{"certificatesigningrequests"}, Verbs: []string{"get", "list", "watch"}},
			{APIGroups: []string{"certificates.k8s.io"}, Resources: []string{"certificatesigningrequests/approval"}, Verbs: []string{"update"}},
			{APIGroups: []string{"certificates.k8s.io"}, Resources: []string{"signers"}, Verbs: []string{"approve"},
				ResourceNames: []string{"kubernetes.io/kube-apiserver-client-kubelet", "kubernetes.io/kubelet-serving"}},
		},
	}
	binding := clusterRoleBinding{
		typeMeta: typeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRoleBinding"},
		Metadata: meta(false),
		RoleRef:  roleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: CSRApproverName},
		Subjects: []subject{{Kind: "ServiceAccount", Name: CSRApproverName, Namespace: CSRApproverNamespace}},
	}
	no, yes := false, true
	history := int32(1)
	job := cronJob{
		typeMeta: typeMeta{APIVersion: "batch/v1", Kind: "CronJob"},
		Metadata: meta(true),
		Spec: cronJobSpec{
			Schedule:                   "*/1 * * * *",
			ConcurrencyPolicy:          "Forbid",
			SuccessfulJobsHistoryLimit: &history,
			FailedJobsHistoryLimit:     &history,
			JobTemplate: jobTemplateSpec{Spec: jobSpec{Template: podTemplateSpec{
				Spec: podSpec{
					ServiceAccountName: CSRApproverName,
					RestartPolicy:      "OnFailure",
					NodeSelector:       map[string]string{masterLabel: ""},
					Tolerations:        masterTolerations,
					PriorityClassName:  "system-cluster-critical",
					SecurityContext: &podSecurityContext{
						RunAsNonRoot:   &yes,
						SeccompProfile: &seccompProfile{Type: "RuntimeDefault"},
					},
					Containers: []container{{
						Name:    CSRApproverName,
						Image:   image,
						Command: []string{"/bin/sh", "-c", approveScript},
						Env:     []envVar{{Name: "NODES", Value: strings.Join(nodes, " ")}},
						SecurityContext: &securityContext{
							AllowPrivilegeEscalation: &no,
							Capabilities:             &capabilities{Drop: []string{"ALL"}},
						},
					}},
				},
			}}},
		},
	}
	var out []Manifest
	for i, o := range []struct {
		name string
		obj  any
	}{{"namespace", ns}, {"serviceaccount", sa}, {"clusterrole", role}, {"clusterrolebinding", binding}, {"cronjob", job}} {
		b, err := yamljson.Marshal(o.obj)
		if err != nil {
			return nil, fmt.Errorf("CSR approver %s: %w", o.name, err)
		}
		out = append(out, Manifest{Name: fmt.Sprintf("%s%d-%s.yaml", CSRApproverPrefix, i, o.name), Data: b})
	}
	return out, nil
}

// AddedManifests are the manifests the hybrid flow adds: the default
// IngressController and the CSR approver.
func AddedManifests(c Cluster, o ManifestOptions) ([]Manifest, error) {
	ing, err := IngressController(c)
	if err != nil {
		return nil, err
	}
	var nodes []string
	for _, n := range c.Nodes {
		if n.Role != ocp.RoleBootstrap {
			nodes = append(nodes, n.Name)
		}
	}
	approver, err := CSRApprover(o.ApproverImage, nodes)
	if err != nil {
		return nil, err
	}
	return append([]Manifest{{Name: IngressControllerManifest, Data: ing}}, approver...), nil
}
