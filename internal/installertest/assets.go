package installertest

import (
	"cmp"
	"crypto/ed25519"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"hash/fnv"
	"math/big"
	"os"
	"path"
	"sort"
	"strings"
	"time"

	"github.com/coreos/ignition/v2/config/util"
	"github.com/coreos/ignition/v2/config/v3_2/types"
	"sigs.k8s.io/yaml"
)

// InstallConfig is the part of install-config.yaml the fixture reads.
type InstallConfig struct {
	BaseDomain string `json:"baseDomain"`
	Metadata   struct {
		Name string `json:"name"`
	} `json:"metadata"`
	ControlPlane struct {
		Replicas     *int   `json:"replicas"`
		Architecture string `json:"architecture"`
	} `json:"controlPlane"`
	Compute []struct {
		Name         string `json:"name"`
		Replicas     *int   `json:"replicas"`
		Architecture string `json:"architecture"`
	} `json:"compute"`
	Platform         map[string]any `json:"platform"`
	PullSecret       string         `json:"pullSecret"`
	SSHKey           string         `json:"sshKey"`
	BootstrapInPlace *struct {
		InstallationDisk string `json:"installationDisk"`
	} `json:"bootstrapInPlace"`
}

// ParseInstallConfig reads install-config.yaml and checks the few fields
// the fixture needs, as the real installer would refuse a config without
// them.
func ParseInstallConfig(data []byte) (InstallConfig, error) {
	var ic InstallConfig
	if err := yaml.Unmarshal(data, &ic); err != nil {
		return ic, fmt.Errorf("failed to unmarshal install-config.yaml: %w", err)
	}
	var missing []string
	if ic.Metadata.Name == "" {
		missing = append(missing, "metadata.name: Required value")
	}
	if ic.BaseDomain == "" {
		missing = append(missing, "baseDomain: Required value")
	}
	if ic.PullSecret == "" {
		missing = append(missing, "pullSecret: Required value")
	}
	if len(missing) > 0 {
		return ic, fmt.Errorf("invalid install-config configuration: %s", strings.Join(missing, ", "))
	}
	// The release payload's architecture (validateReleaseArchitecture): a
	// single-architecture one installs its own only.
	if rel := ReleaseArch(); rel != "multi" {
		var bad []string
		if a := cmp.Or(ic.ControlPlane.Architecture, "amd64"); a != rel {
			bad = append(bad, fmt.Sprintf("controlPlane.architecture: Invalid value: %q: cannot create %s controlPlane node from a single architecture %s release payload", a, a, rel))
		}
		for i, c := range ic.Compute {
			if c.Architecture != "" && c.Architecture != rel {
				bad = append(bad, fmt.Sprintf("compute[%d].architecture: Invalid value: %q: cannot create %s compute node from a single architecture %s release payload", i, c.Architecture, c.Architecture, rel))
			}
		}
		if len(bad) > 0 {
			return ic, fmt.Errorf("invalid \"install-config.yaml\" file: %s", strings.Join(bad, ", "))
		}
	}
	return ic, nil
}

// EnvReleaseArch is the architecture of the release payload the fixture
// plays (`version` prints it, and install-configs are checked against
// it): amd64 unless set (multi for a mixed cluster, as the multi-arch
// installer's).
const EnvReleaseArch = "FAKE_INSTALLER_RELEASE_ARCH"

// ReleaseArch is the fixture's release payload architecture.
func ReleaseArch() string { return cmp.Or(os.Getenv(EnvReleaseArch), "amd64") }

// RPMArch is an install-config architecture as the agent installer names
// its ISOs (x86_64, aarch64).
func RPMArch(arch string) string {
	if arch == "arm64" {
		return "aarch64"
	}
	return "x86_64"
}

// ClusterDomain is name.baseDomain.
func (ic InstallConfig) ClusterDomain() string { return ic.Metadata.Name + "." + ic.BaseDomain }

// Masters is controlPlane.replicas (3 when unset, as the installer's default).
func (ic InstallConfig) Masters() int {
	if ic.ControlPlane.Replicas == nil {
		return 3
	}
	return *ic.ControlPlane.Replicas
}

// Workers is the worker pool's replicas (3 when unset).
func (ic InstallConfig) Workers() int {
	for _, p := range ic.Compute {
		if p.Name == "worker" && p.Replicas != nil {
			return *p.Replicas
		}
	}
	return 3
}

// infraID is name-xxxxx, derived from the name so the fixture's output is
// the same on every run.
func (ic InstallConfig) infraID() string {
	h := fnv.New32a()
	h.Write([]byte(ic.ClusterDomain()))
	const letters = "bcdfghjklmnpqrstvwxz2456789"
	v := h.Sum32()
	var b strings.Builder
	for range 5 {
		b.WriteByte(letters[v%uint32(len(letters))])
		v /= uint32(len(letters))
	}
	return ic.Metadata.Name + "-" + b.String()
}

// Manifests returns what `create manifests` writes, by path relative to
// the installer's directory: the cluster config manifests under manifests/,
// and under openshift/ the Machine, MachineSet and ControlPlaneMachineSet
// manifests (as the installer writes them for platforms with machine API
// support) with the secrets and machine configs.
func Manifests(ic InstallConfig) map[string][]byte {
	m := map[string]string{}
	domain := ic.ClusterDomain()
	infra := ic.infraID()
	m["manifests/cluster-config.yaml"] = fmt.Sprintf(`apiVersion: v1
data:
  install-config: |
    baseDomain: %s
    metadata:
      name: %s
kind: ConfigMap
metadata:
  name: cluster-config-v1
  namespace: kube-system
`, ic.BaseDomain, ic.Metadata.Name)
	m["manifests/cluster-dns-02-config.yml"] = fmt.Sprintf(`apiVersion: config.openshift.io/v1
kind: DNS
metadata:
  creationTimestamp: null
  name: cluster
spec:
  baseDomain: %s
  platform:
    aws: null
    type: ""
status: {}
`, domain)
	m["manifests/cluster-infrastructure-02-config.yml"] = fmt.Sprintf(`apiVersion: config.openshift.io/v1
kind: Infrastructure
metadata:
  creationTimestamp: null
  name: cluster
spec:
  cloudConfig:
    name: ""
  platformSpec:
    type: None
status:
  apiServerInternalURI: https://api-int.%[1]s:6443
  apiServerURL: https://api.%[1]s:6443
  controlPlaneTopology: HighlyAvailable
  cpuPartitioning: None
  etcdDiscoveryDomain: ""
  infrastructureName: %[2]s
  infrastructureTopology: HighlyAvailable
  platform: None
  platformStatus:
    type: None
`, domain, infra)
	m["manifests/cluster-ingress-02-config.yml"] = fmt.Sprintf(`apiVersion: config.openshift.io/v1
kind: Ingress
metadata:
  creationTimestamp: null
  name: cluster
spec:
  domain: apps.%s
  loadBalancer:
    platform:
      type: ""
status:
  defaultPlacement: ""
`, domain)
	m["manifests/cluster-network-02-config.yml"] = `apiVersion: config.openshift.io/v1
kind: Network
metadata:
  creationTimestamp: null
  name: cluster
spec:
  clusterNetwork:
  - cidr: 10.128.0.0/14
    hostPrefix: 23
  externalIP:
    policy: {}
  networkType: OVNKubernetes
  serviceNetwork:
  - 172.30.0.0/16
status: {}
`
	m["manifests/cluster-scheduler-02-config.yml"] = fmt.Sprintf(`apiVersion: config.openshift.io/v1
kind: Scheduler
metadata:
  creationTimestamp: null
  name: cluster
spec:
  mastersSchedulable: %t
  policy:
    name: ""
status: {}
`, ic.Workers() == 0)
	m["manifests/cvo-overrides.yaml"] = fmt.Sprintf(`apiVersion: config.openshift.io/v1
kind: ClusterVersion
metadata:
  name: version
  namespace: openshift-cluster-version
spec:
  channel: stable-4.18
  clusterID: %s
`, clusterID(ic))
	m["manifests/openshift-config-secret-pull-secret.yaml"] = fmt.Sprintf(`apiVersion: v1
data:
  .dockerconfigjson: %s
kind: Secret
metadata:
  name: pull-secret
  namespace: openshift-config
type: kubernetes.io/dockerconfigjson
`, base64.StdEncoding.EncodeToString([]byte(ic.PullSecret)))
	m["openshift/99_kubeadmin-password-secret.yaml"] = fmt.Sprintf(`apiVersion: v1
data:
  kubeadmin: %s
kind: Secret
metadata:
  name: kubeadmin
  namespace: kube-system
type: Opaque
`, base64.StdEncoding.EncodeToString([]byte("$2a$10$fixturehashfixturehashfixturehashfixturehashfixture")))
	for _, role := range []string{"master", "worker"} {
		m["openshift/99_openshift-machineconfig_99-"+role+"-ssh.yaml"] = fmt.Sprintf(`apiVersion: machineconfiguration.openshift.io/v1
kind: MachineConfig
metadata:
  creationTimestamp: null
  labels:
    machineconfiguration.openshift.io/role: %[1]s
  name: 99-%[1]s-ssh
spec:
  config:
    ignition:
      version: 3.2.0
    passwd:
      users:
      - name: core
        sshAuthorizedKeys:
        - %[2]s
  extensions: null
  fips: false
  kernelArguments: null
  kernelType: ""
  osImageURL: ""
`, role, strings.TrimSpace(ic.SSHKey))
		m["openshift/99_openshift-cluster-api_"+role+"-user-data-secret.yaml"] = fmt.Sprintf(`apiVersion: v1
data:
  disableTemplating: dHJ1ZQo=
  userData: %s
kind: Secret
metadata:
  name: %s-user-data
  namespace: openshift-machine-api
type: Opaque
`, base64.StdEncoding.EncodeToString(pointerConfig(ic, role, "3.2.0")), role)
	}
	for i := range ic.Masters() {
		m[fmt.Sprintf("openshift/99_openshift-cluster-api_master-machines-%d.yaml", i)] = fmt.Sprintf(`apiVersion: machine.openshift.io/v1beta1
kind: Machine
metadata:
  creationTimestamp: null
  labels:
    machine.openshift.io/cluster-api-cluster: %[1]s
    machine.openshift.io/cluster-api-machine-role: master
    machine.openshift.io/cluster-api-machine-type: master
  name: %[1]s-master-%[2]d
  namespace: openshift-machine-api
spec:
  lifecycleHooks: {}
  metadata: {}
  providerSpec:
    value:
      apiVersion: baremetal.cluster.k8s.io/v1alpha1
      customDeploy:
        method: install_coreos
      hostSelector: {}
      image:
        checksum: ""
        url: ""
      kind: BareMetalMachineProviderSpec
      metadata:
        creationTimestamp: null
      userData:
        name: master-user-data-managed
status: {}
`, infra, i)
	}
	m["openshift/99_openshift-cluster-api_worker-machineset-0.yaml"] = fmt.Sprintf(`apiVersion: machine.openshift.io/v1beta1
kind: MachineSet
metadata:
  creationTimestamp: null
  labels:
    machine.openshift.io/cluster-api-cluster: %[1]s
    machine.openshift.io/cluster-api-machine-role: worker
    machine.openshift.io/cluster-api-machine-type: worker
  name: %[1]s-worker-0
  namespace: openshift-machine-api
spec:
  replicas: %[2]d
  selector:
    matchLabels:
      machine.openshift.io/cluster-api-cluster: %[1]s
      machine.openshift.io/cluster-api-machineset: %[1]s-worker-0
  template:
    metadata:
      labels:
        machine.openshift.io/cluster-api-cluster: %[1]s
        machine.openshift.io/cluster-api-machine-role: worker
        machine.openshift.io/cluster-api-machine-type: worker
        machine.openshift.io/cluster-api-machineset: %[1]s-worker-0
    spec:
      lifecycleHooks: {}
      metadata: {}
      providerSpec:
        value:
          apiVersion: baremetal.cluster.k8s.io/v1alpha1
          kind: BareMetalMachineProviderSpec
          userData:
            name: worker-user-data-managed
status:
  replicas: 0
`, infra, ic.Workers())
	m["openshift/99_openshift-machine-api_master-control-plane-machine-set.yaml"] = fmt.Sprintf(`apiVersion: machine.openshift.io/v1
kind: ControlPlaneMachineSet
metadata:
  creationTimestamp: null
  labels:
    machine.openshift.io/cluster-api-cluster: %[1]s
  name: cluster
  namespace: openshift-machine-api
spec:
  replicas: %[2]d
  selector:
    matchLabels:
      machine.openshift.io/cluster-api-cluster: %[1]s
      machine.openshift.io/cluster-api-machine-role: master
      machine.openshift.io/cluster-api-machine-type: master
  state: Inactive
  strategy:
    type: RollingUpdate
  template:
    machineType: machines_v1beta1_machine_openshift_io
status: {}
`, infra, ic.Masters())
	m["openshift/openshift-install-manifests.yaml"] = `apiVersion: v1
data:
  invoker: openshift-install
  version: ` + Version + `
kind: ConfigMap
metadata:
  name: openshift-install-manifests
  namespace: openshift-config
`
	out := make(map[string][]byte, len(m))
	for k, v := range m {
		out[k] = []byte(v)
	}
	return out
}

// Version is the release the fixture says it installs.
const Version = "4.18.0-fixture"

func clusterID(ic InstallConfig) string {
	h := fnv.New128a()
	h.Write([]byte(ic.ClusterDomain()))
	b := h.Sum(nil)
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// RootCA is the fixture's root CA certificate (PEM): an Ed25519 key from a
// fixed seed and fixed dates, so every run writes the same bytes.
func RootCA() []byte {
	key := ed25519.NewKeyFromSeed([]byte("bmlab fixture openshift-install!"))
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "root-ca", OrganizationalUnit: []string{"openshift"}},
		NotBefore:             time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC),
		NotAfter:              time.Date(2035, 1, 1, 0, 0, 0, 0, time.UTC),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(nil, tmpl, tmpl, key.Public(), key)
	if err != nil {
		panic(fmt.Sprintf("fixture root CA: %v", err)) // fixed inputs: cannot fail
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

// MachineConfigServer is the pointer configs' merge[0] source for role.
func MachineConfigServer(ic InstallConfig, role string) string {
	return "https://api-int." + ic.ClusterDomain() + ":22623/config/" + role
}

// pointerConfig is master.ign or worker.ign: the version, the machine
// config server's URL in ignition.config.merge and the root CA in
// ignition.security.tls, as the installer writes them.
func pointerConfig(ic InstallConfig, role, version string) []byte {
	cfg := types.Config{Ignition: types.Ignition{
		Version: version,
		Config: types.IgnitionConfig{Merge: []types.Resource{{
			Source: util.StrToPtr(MachineConfigServer(ic, role)),
		}}},
		Security: types.Security{TLS: types.TLS{CertificateAuthorities: []types.Resource{{
			Source: util.StrToPtr(dataURL(RootCA())),
		}}}},
	}}
	b, err := json.Marshal(cfg)
	if err != nil {
		panic(err) // plain structs: cannot fail
	}
	return b
}

func dataURL(b []byte) string {
	return "data:text/plain;charset=utf-8;base64," + base64.StdEncoding.EncodeToString(b)
}

// Ignition file names the installer writes.
const (
	BootstrapIgn = "bootstrap.ign"
	MasterIgn    = "master.ign"
	WorkerIgn    = "worker.ign"
)

// IgnitionConfigs returns what `create ignition-configs` writes, by path
// relative to the installer's directory, in the given spec version:
// bootstrap.ign (files, the consumed manifests under /opt/openshift,
// systemd units and user core), master.ign and worker.ign (pointer
// configs), auth/kubeconfig, auth/kubeadmin-password and metadata.json.
func IgnitionConfigs(ic InstallConfig, version string, manifests map[string][]byte) map[string][]byte {
	out := map[string][]byte{
		MasterIgn: pointerConfig(ic, "master", version),
		WorkerIgn: pointerConfig(ic, "worker", version),
	}
	out[BootstrapIgn] = bootstrapConfig(ic, version, manifests)
	ca := base64.StdEncoding.EncodeToString(RootCA())
	out["auth/kubeconfig"] = []byte(fmt.Sprintf(`clusters:
- cluster:
    certificate-authority-data: %[1]s
    server: https://api.%[2]s:6443
  name: %[3]s
contexts:
- context:
    cluster: %[3]s
    user: admin
  name: admin
current-context: admin
preferences: {}
users:
- name: admin
  user:
    client-certificate-data: %[1]s
    client-key-data: %[4]s
`, ca, ic.ClusterDomain(), ic.Metadata.Name, base64.StdEncoding.EncodeToString([]byte("fixture key"))))
	out["auth/kubeadmin-password"] = []byte(KubeadminPassword)
	meta, _ := json.Marshal(map[string]any{
		"clusterName": ic.Metadata.Name,
		"clusterID":   clusterID(ic),
		"infraID":     ic.infraID(),
		"none":        map[string]any{},
	})
	out["metadata.json"] = meta
	return out
}

// KubeadminPassword is what auth/kubeadmin-password holds.
const KubeadminPassword = "fixtu-rexam-plepw-dabcd"

func bootstrapConfig(ic InstallConfig, version string, manifests map[string][]byte) []byte {
	file := func(p string, mode int, contents string) types.File {
		return types.File{
			Node: types.Node{Path: p, Overwrite: util.BoolToPtr(true), User: types.NodeUser{Name: util.StrToPtr("root")}},
			FileEmbedded1: types.FileEmbedded1{
				Mode:     util.IntToPtr(mode),
				Contents: types.Resource{Source: util.StrToPtr(dataURL([]byte(contents)))},
			},
		}
	}
	domain := ic.ClusterDomain()
	files := []types.File{
		file("/etc/motd", 0o644, "This is the bootstrap node; it will be destroyed when the master is fully up.\n"),
		file("/etc/containers/registries.conf", 0o600, "unqualified-search-registries = []\n"),
		file("/root/.docker/config.json", 0o600, ic.PullSecret),
		file("/usr/local/bin/bootkube.sh", 0o555, "#!/usr/bin/env bash\nset -euoE pipefail\necho bootkube\n"),
		file("/usr/local/bin/release-image.sh", 0o555, "#!/usr/bin/env bash\nRELEASE_IMAGE_DIGEST=quay.io/openshift-release-dev/ocp-release@sha256:0\n"),
		file("/usr/local/bin/report-progress.sh", 0o555, "#!/usr/bin/env bash\necho progress\n"),
		file("/opt/openshift/tls/root-ca.crt", 0o644, string(RootCA())),
		file("/opt/openshift/tls/kube-apiserver-lb-server.crt", 0o644, "api."+domain+"\n"),
		file("/opt/openshift/auth/kubeconfig", 0o600, "server: https://api-int."+domain+":6443\n"),
		file("/etc/kubernetes/kubeconfig", 0o600, "server: https://localhost:6443\n"),
	}
	names := make([]string, 0, len(manifests))
	for n := range manifests {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		files = append(files, file(path.Join("/opt/openshift", n), 0o600, string(manifests[n])))
	}
	unit := func(name string, enabled bool, contents string) types.Unit {
		u := types.Unit{Name: name, Contents: util.StrToPtr(contents)}
		if enabled {
			u.Enabled = util.BoolToPtr(true)
		}
		return u
	}
	cfg := types.Config{
		Ignition: types.Ignition{Version: version},
		Passwd: types.Passwd{Users: []types.PasswdUser{{
			Name: "core", SSHAuthorizedKeys: []types.SSHAuthorizedKey{types.SSHAuthorizedKey(strings.TrimSpace(ic.SSHKey))},
		}}},
		Storage: types.Storage{Files: files},
		Systemd: types.Systemd{Units: []types.Unit{
			unit("approve-csr.service", true, "[Unit]\nDescription=Approve CSRs during bootstrap phase\n[Service]\nExecStart=/usr/local/bin/approve-csr.sh\n[Install]\nWantedBy=multi-user.target\n"),
			unit("bootkube.service", false, "[Unit]\nDescription=Bootstrap a Kubernetes cluster\n[Service]\nExecStart=/usr/local/bin/bootkube.sh\n"),
			unit("kubelet.service", true, "[Unit]\nDescription=Kubernetes Kubelet\n[Service]\nExecStart=/usr/bin/kubelet\n[Install]\nWantedBy=multi-user.target\n"),
			unit("progress.service", true, "[Unit]\nDescription=Report the completion of the cluster bootstrap process\n[Service]\nExecStart=/usr/local/bin/report-progress.sh\n[Install]\nWantedBy=multi-user.target\n"),
			unit("release-image.service", false, "[Unit]\nDescription=Download the OpenShift Release Image\n[Service]\nExecStart=/usr/local/bin/release-image-download.sh\n"),
			{Name: "zincati.service", Enabled: util.BoolToPtr(false)},
		}},
	}
	if strings.TrimSpace(ic.SSHKey) == "" {
		cfg.Passwd.Users = nil
	}
	b, err := json.Marshal(cfg)
	if err != nil {
		panic(err) // plain structs: cannot fail
	}
	return b
}
