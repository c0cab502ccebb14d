//go:build tools

// Package cluster pins the sources of the local cluster's node and controller binaries
// (kubelet, kube-controller-manager, kube-scheduler, kube-proxy) at the same Kubernetes
// version as the control plane in ../controlplane, so that `make cluster` builds them from
// the Go module proxy alone. It is a module of its own so that adding the node binaries does
// not change the control plane's cache key.
package cluster

import (
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-proxy"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubelet"
)
