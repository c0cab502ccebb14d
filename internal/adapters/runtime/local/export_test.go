package local

import (
	"maps"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/agentplane/agentplane/internal/adapters/runtime/syscallpolicy"
)

// SupervisorRounds pokes the supervisor of agent ns/name and returns once it has done n
// more rounds (false: no such agent, or it ended first). A test that checks that the
// supervisor does not do something waits for its rounds, not for time.
func SupervisorRounds(r *Runtime, ns, name string, n int) bool {
	r.mu.Lock()
	a := r.agents[types.NamespacedName{Namespace: ns, Name: name}]
	r.mu.Unlock()
	if a == nil {
		return false
	}
	for range n {
		before := a.steps.Load()
		a.poke()
		for a.steps.Load() == before {
			select {
			case <-a.done:
				return false
			case <-time.After(time.Millisecond):
			}
		}
	}
	return true
}

// ProcessTree is pid and every live process descended from it, as a checkpoint's settle walks
// them (treeOf).
func ProcessTree(pid int) []int {
	tree, _ := treeOf(pid)
	return slices.Sorted(maps.Keys(tree))
}

// SetBindFault makes the bind of a claimed warm gateway fail with what f returns (nil: no
// fault). Set it before the Ensure calls it should affect.
func SetBindFault(r *Runtime, f func(member string) error) { r.bindFault = f }

// PoolMember is a member of a warm pool as the tests see it.
type PoolMember struct {
	ID, Dir, Home string
	PID, Port     int
	Ready         bool
}

// PoolMembers lists the members of the pool name (booting and ready).
func PoolMembers(r *Runtime, name string) []PoolMember {
	r.poolMu.Lock()
	defer r.poolMu.Unlock()
	var out []PoolMember
	if p := r.pools[name]; p != nil {
		for _, m := range p.members {
			out = append(out, PoolMember{ID: m.id, Dir: m.dir, Home: m.home, PID: m.proc.pid, Port: m.port, Ready: m.ready})
		}
	}
	return out
}

// PoolDiscarded is how many reservations of the pool name were discarded.
func PoolDiscarded(r *Runtime, name string) int64 {
	r.poolMu.Lock()
	defer r.poolMu.Unlock()
	if p := r.pools[name]; p != nil {
		return p.discarded
	}
	return 0
}

// RefusedSyscall is an entry of the sandboxes' seccomp list as the tests see it.
type RefusedSyscall struct {
	Name        string
	Nr, Errno   int
	OnlyIfFlags uint32
}

// RefusedSyscalls is the sandboxes' seccomp list.
func RefusedSyscalls() []RefusedSyscall {
	var out []RefusedSyscall
	for _, s := range syscallpolicy.Refused {
		out = append(out, RefusedSyscall{Name: s.Name, Nr: int(s.Nr), Errno: int(s.Errno), OnlyIfFlags: s.Flags})
	}
	return out
}

// CheckpointPages counts a checkpoint's pages, in bytes: in its own pages files and in its
// parent image (its template's).
func CheckpointPages(dir string) (own, inParent int64, err error) { return checkpointPages(dir) }

// RestoredInFull is what a restored gateway's status says when its memory was restored in full
// after its restore on demand failed.
const RestoredInFull = restoredInFull

// RestoredOnDemand is what a restored gateway's status says when its memory was restored on
// demand.
const RestoredOnDemand = restoredOnDemand

// ChildPIDs is childPIDs: the children of process pid.
var ChildPIDs = childPIDs
