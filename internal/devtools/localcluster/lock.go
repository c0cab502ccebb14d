package localcluster

import (
	"os"
	"path/filepath"
	"syscall"
)

// lockFile serialises local clusters on this machine: they share the bridge, the kubelet's
// cgroup root and the iptables chains they sweep.
var lockFile = filepath.Join(os.TempDir(), "agentplane-cluster.lock")

// Lock waits until no other local cluster runs on this machine and holds that until unlock.
// Start takes it and Stop releases it after its check for leftovers; a test that checks for
// leftovers after a stop takes it too, so that a cluster starting meanwhile is not counted.
func Lock() (unlock func(), err error) {
	f, err := os.OpenFile(lockFile, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, err
	}
	return func() {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}, nil
}
