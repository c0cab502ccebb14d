//go:build tools

// Package kwok pins the kwok controller (sigs.k8s.io/kwok/cmd/kwok), which simulates the
// local cluster's KWOK nodes and their pods. It is a module of its own: kwok pins its own
// k8s.io versions, which must not move the k8s.io/kubernetes graph of ../cluster.
package kwok

import (
	_ "sigs.k8s.io/kwok/cmd/kwok"
)
