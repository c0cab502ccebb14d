package local_test

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/agentplane/agentplane/internal/adapters/runtime/local"
)

// fileLocks lists the file locks held by the process tree rooted at pid, each as its file's
// path, kind, type and range (the "lock:" lines of /proc/PID/fdinfo, which name no process
// and no inode a restore changes), sorted, one entry per lock and file.
func fileLocks(t *testing.T, pid int) []string {
	t.Helper()
	var locks []string
	for _, p := range local.ProcessTree(pid) {
		fds, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", p))
		for _, fd := range fds {
			info, err := os.ReadFile(fmt.Sprintf("/proc/%d/fdinfo/%s", p, fd.Name()))
			if err != nil {
				continue
			}
			target, _ := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", p, fd.Name()))
			for _, line := range strings.Split(string(info), "\n") {
				// lock:	1: POSIX  ADVISORY  READ 16881 07:00:131080 128 128
				f := strings.Fields(line)
				if len(f) == 9 && f[0] == "lock:" {
					locks = append(locks, strings.Join([]string{target, f[2], f[3], f[4], f[7], f[8]}, " "))
				}
			}
		}
	}
	slices.Sort(locks)
	return slices.Compact(locks)
}

// walIndexLocks are the locks of locks (fileLocks) that mark a SQLite WAL index in use: the read
// lock every open connection holds on the index's byte 128 (its "DMS" byte) for as long as it is
// open. A process that finds none truncates the index and takes the database for its own.
func walIndexLocks(locks []string) []string {
	var dms []string
	for _, l := range locks {
		if strings.Contains(l, ".sqlite-shm POSIX ADVISORY READ 128 128") {
			dms = append(dms, l)
		}
	}
	return dms
}
