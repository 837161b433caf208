//go:build tools

// Package tools pins the commands hack/build-kube.sh builds from KubeVirt.
package tools

import (
	_ "kubevirt.io/kubevirt/cmd/virt-api"
	_ "kubevirt.io/kubevirt/cmd/virt-controller"
)
