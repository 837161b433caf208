// Package kubetest starts a real etcd and kube-apiserver on loopback for
// tests, with TLS and a bearer token, in a temporary directory, and stops
// them when the test ends. The binaries are the ones hack/build-kube.sh
// builds into _out/tools (pinned versions); without them the test is
// skipped, or fails under CI=true.
//
// There are no controllers, no scheduler and no kubelet: objects are
// stored, validated (CRD schemas, admission) and watched, and that is all.
package kubetest
