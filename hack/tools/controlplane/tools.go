//go:build tools

// Package controlplane pins the sources of the test control plane (kube-apiserver and
// etcd) so that `make envtest-assets` can build them from the Go module proxy alone.
package controlplane

import (
	_ "go.etcd.io/etcd/server/v3"
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
)
