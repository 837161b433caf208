//go:build tools

// Package tools pins the generator and the API types it reads.
package tools

import (
	_ "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	_ "sigs.k8s.io/controller-tools/cmd/controller-gen"
)
