// Package kubetest starts a real etcd and kube-apiserver on loopback for
// tests, with TLS, RBAC, a bearer token of the admin, service account
// tokens (TokenRequest) and the aggregation layer (a front proxy CA and
// client certificate, so an extension API server such as KubeVirt's
// virt-api can be registered with an APIService), in a temporary
// directory, and stops them when the test ends. It also makes the test
// CAs and certificates of what runs beside them. The binaries are the ones
// hack/build-kube.sh builds (the tool cache, linked into _out/tools);
// without them the test is skipped, or fails under CI=true.
//
// kube-apiserver runs alone: no kube-controller-manager, scheduler or
// kubelet. Objects are stored, validated (CRD schemas, admission,
// webhooks) and watched; what else a test needs runs beside it
// (kubevirttest: KubeVirt's control plane and a fixture node).
package kubetest
