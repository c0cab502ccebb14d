//go:build tools

// Package tools pins kube-router, whose network policy firewall (alone: no router, no
// service proxy) enforces NetworkPolicies on the local cluster's real node.
package tools

import _ "github.com/cloudnativelabs/kube-router/v2/cmd/kube-router"
