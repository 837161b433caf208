//go:build tools

// Package tools pins the commands hack/build-kube.sh builds.
package tools

import _ "go.etcd.io/etcd/server/v3"
