package testenv

import (
	"os"
	"testing"
)

// RealNode tells whether tests of the real node (the local cluster's kubelet, containerd and
// containers) can run here: they need root. Without it the test is skipped with the reason,
// except under CI=true, where a missing real node is a failure.
func RealNode(t testing.TB) bool {
	t.Helper()
	if os.Geteuid() == 0 {
		return true
	}
	Skip(t, "the real-node tests need root (containerd, the kubelet, mounts, iptables); run them as root")
	return false
}
