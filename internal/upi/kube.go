package upi

// The Kubernetes objects the hybrid flow writes (static pods, the CSR
// approver's manifests), as typed values: the fields it sets, under the
// names and with the omissions of Kubernetes' own types (k8s.io/api), so
// that the files are what the kubelet and the API server read. The tests
// decode them into k8s.io/api's types to hold that; labctl itself links
// no Kubernetes package.

// typeMeta is an object's apiVersion and kind.
type typeMeta struct {
	APIVersion string `json:"apiVersion,omitempty"`
	Kind       string `json:"kind,omitempty"`
}

// objectMeta is an object's metadata.
type objectMeta struct {
	Name      string            `json:"name,omitempty"`
	Namespace string            `json:"namespace,omitempty"`
	Labels    map[string]string `json:"labels,omitempty"`
}

// empty is a status or spec the hybrid flow leaves to the cluster ({}).
type empty struct{}

type pod struct {
	typeMeta `json:",inline"`
	Metadata objectMeta `json:"metadata"`
	Spec     podSpec    `json:"spec"`
	Status   empty      `json:"status"`
}

type podSpec struct {
	Volumes            []volume            `json:"volumes,omitempty"`
	InitContainers     []container         `json:"initContainers,omitempty"`
	Containers         []container         `json:"containers"`
	RestartPolicy      string              `json:"restartPolicy,omitempty"`
	NodeSelector       map[string]string   `json:"nodeSelector,omitempty"`
	ServiceAccountName string              `json:"serviceAccountName,omitempty"`
	HostNetwork        bool                `json:"hostNetwork,omitempty"`
	SecurityContext    *podSecurityContext `json:"securityContext,omitempty"`
	PriorityClassName  string              `json:"priorityClassName,omitempty"`
	Tolerations        []toleration        `json:"tolerations,omitempty"`
}

type podSecurityContext struct {
	RunAsNonRoot   *bool           `json:"runAsNonRoot,omitempty"`
	SeccompProfile *seccompProfile `json:"seccompProfile,omitempty"`
}

type seccompProfile struct {
	Type string `json:"type"`
}

type container struct {
	Name            string           `json:"name"`
	Image           string           `json:"image,omitempty"`
	Command         []string         `json:"command,omitempty"`
	Args            []string         `json:"args,omitempty"`
	Env             []envVar         `json:"env,omitempty"`
	Resources       empty            `json:"resources"`
	VolumeMounts    []volumeMount    `json:"volumeMounts,omitempty"`
	SecurityContext *securityContext `json:"securityContext,omitempty"`
}

type envVar struct {
	Name  string `json:"name"`
	Value string `json:"value,omitempty"`
}

type volumeMount struct {
	Name      string `json:"name"`
	MountPath string `json:"mountPath"`
}

type securityContext struct {
	Capabilities             *capabilities `json:"capabilities,omitempty"`
	Privileged               *bool         `json:"privileged,omitempty"`
	AllowPrivilegeEscalation *bool         `json:"allowPrivilegeEscalation,omitempty"`
}

type capabilities struct {
	Drop []string `json:"drop,omitempty"`
}

type volume struct {
	Name     string    `json:"name"`
	HostPath *hostPath `json:"hostPath,omitempty"`
	EmptyDir *empty    `json:"emptyDir,omitempty"`
}

type hostPath struct {
	Path string `json:"path"`
	Type string `json:"type,omitempty"`
}

type toleration struct {
	Key      string `json:"key,omitempty"`
	Operator string `json:"operator,omitempty"`
	Effect   string `json:"effect,omitempty"`
}

type labelSelector struct {
	MatchLabels map[string]string `json:"matchLabels,omitempty"`
}

type namespace struct {
	typeMeta `json:",inline"`
	Metadata objectMeta `json:"metadata"`
	Spec     empty      `json:"spec"`
	Status   empty      `json:"status"`
}

type serviceAccount struct {
	typeMeta `json:",inline"`
	Metadata objectMeta `json:"metadata"`
}

type clusterRole struct {
	typeMeta `json:",inline"`
	Metadata objectMeta   `json:"metadata"`
	Rules    []policyRule `json:"rules"`
}

type policyRule struct {
	Verbs         []string `json:"verbs"`
	APIGroups     []string `json:"apiGroups,omitempty"`
	Resources     []string `json:"resources,omitempty"`
	ResourceNames []string `json:"resourceNames,omitempty"`
}

type clusterRoleBinding struct {
	typeMeta `json:",inline"`
	Metadata objectMeta `json:"metadata"`
	Subjects []subject  `json:"subjects,omitempty"`
	RoleRef  roleRef    `json:"roleRef"`
}

type subject struct {
	Kind      string `json:"kind"`
	Name      string `json:"name"`
	Namespace string `json:"namespace,omitempty"`
}

type roleRef struct {
	APIGroup string `json:"apiGroup"`
	Kind     string `json:"kind"`
	Name     string `json:"name"`
}

type cronJob struct {
	typeMeta `json:",inline"`
	Metadata objectMeta  `json:"metadata"`
	Spec     cronJobSpec `json:"spec"`
	Status   empty       `json:"status"`
}

type cronJobSpec struct {
	Schedule                   string          `json:"schedule"`
	ConcurrencyPolicy          string          `json:"concurrencyPolicy,omitempty"`
	JobTemplate                jobTemplateSpec `json:"jobTemplate"`
	SuccessfulJobsHistoryLimit *int32          `json:"successfulJobsHistoryLimit,omitempty"`
	FailedJobsHistoryLimit     *int32          `json:"failedJobsHistoryLimit,omitempty"`
}

type jobTemplateSpec struct {
	Metadata objectMeta `json:"metadata"`
	Spec     jobSpec    `json:"spec"`
}

type jobSpec struct {
	Template podTemplateSpec `json:"template"`
}

type podTemplateSpec struct {
	Metadata objectMeta `json:"metadata"`
	Spec     podSpec    `json:"spec"`
}
