//go:build tools

// Package tools pins the commands hack/build-kube.sh builds.
package tools

import _ "k8s.io/kubernetes/cmd/kube-apiserver"
