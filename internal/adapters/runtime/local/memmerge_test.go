package local_test

import (
	"fmt"
	"testing"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/adapters/runtime"
	"github.com/agentplane/agentplane/internal/adapters/runtime/local"
	"github.com/agentplane/agentplane/internal/adapters/runtime/local/memmerge"
)

// TestMemoryMergeMarksEveryProcessOfAGateway: with MemoryMerge every process of an agent's
// sandbox is marked mergeable, as started and as restored from its checkpoint; without it
// (the default) none is, which is also the violation the check must see.
func TestMemoryMergeMarksEveryProcessOfAGateway(t *testing.T) {
	for _, merge := range []bool{false, true} {
		t.Run(fmt.Sprintf("MemoryMerge=%v", merge), func(t *testing.T) {
			f := checkpointing(t, func(o *local.Options) { o.MemoryMerge = merge })
			a := newAgent("merge")
			d := ckptDesired("tok-1")
			waitPhase(t, f, a, d, runtime.PhaseRunning)
			checkMarked(t, gatewayPID(t, f, a), merge, "started")
			if r := suspendAndResume(t, f, a, d, nil); r.Reason != agentsv1.ReasonRestoredFromCheckpoint {
				t.Fatalf("resume = %+v, want reason %s", r, agentsv1.ReasonRestoredFromCheckpoint)
			}
			waitPhase(t, f, a, d, runtime.PhaseRunning)
			checkMarked(t, gatewayPID(t, f, a), merge, "restored")
		})
	}
}

// checkMarked fails unless process pid and every process under it are marked mergeable as
// want says (the gateway's sandbox: bwrap and the sandbox's init, or the restored init, and
// the engine).
func checkMarked(t *testing.T, pid int, want bool, what string) {
	t.Helper()
	n := 0
	for todo := []int{pid}; len(todo) > 0; todo = todo[1:] {
		p := todo[0]
		marked, err := memmerge.Marked(p)
		if err != nil {
			t.Fatalf("%s gateway: process %d: %v", what, p, err)
		}
		if marked != want {
			t.Errorf("%s gateway: process %d marked mergeable: %v, want %v", what, p, marked, want)
		}
		n++
		todo = append(todo, local.ChildPIDs(p)...)
	}
	if n < 2 {
		t.Errorf("%s gateway: %d processes from %d, want the engine under it too", what, n, pid)
	}
}
