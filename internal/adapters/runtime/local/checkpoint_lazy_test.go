package local_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/adapters/runtime"
	"github.com/agentplane/agentplane/internal/adapters/runtime/local"
	"github.com/agentplane/agentplane/internal/devtools/testenv"
)

// TestWakeRestoresMemoryOnDemand: where this host has userfaultfd, a waking gateway's memory
// is restored on demand (the runtime says so), the restored gateway serves as before and its
// checkpoint goes once every page is copied, twice in a row; with EagerRestore the memory is
// restored in full, and the runtime says why.
func TestWakeRestoresMemoryOnDemand(t *testing.T) {
	for name, eager := range map[string]bool{"on demand": false, "in full": true} {
		t.Run(name, func(t *testing.T) {
			f := checkpointing(t, func(o *local.Options) { o.EagerRestore = eager })
			ok, why := f.rt.LazyRestore()
			switch {
			case eager && (ok || why != "EagerRestore is set"):
				t.Fatalf("LazyRestore() = %v, %q with EagerRestore set", ok, why)
			case !eager && !ok && strings.HasPrefix(why, "criu check --feature"):
				testenv.Skip(t, "this kernel has no userfaultfd for CRIU: %s", why)
			case !eager && !ok:
				t.Fatalf("LazyRestore() = false: %s", why)
			}
			a := newAgent("ckpt-lazy")
			d := ckptDesired("tok-1")
			o := waitPhase(t, f, a, d, runtime.PhaseRunning)
			for round := 1; round <= 2; round++ {
				r := suspendAndResume(t, f, a, d, nil)
				if r.Reason != agentsv1.ReasonRestoredFromCheckpoint {
					t.Fatalf("round %d: resume = %+v, want reason %s", round, r, agentsv1.ReasonRestoredFromCheckpoint)
				}
				restoredOnDemand(t, f, r)
				waitPhase(t, f, a, d, runtime.PhaseRunning)
				waitStatus(t, o.Endpoint, "tok-1", 404)
				if n := gatewayStarts(t, f, a, "[gateway] listening on"); n != 1 {
					t.Fatalf("round %d: the gateway started %d times, want once (restored, not restarted)", round, n)
				}
			}
		})
	}
}

// TestPageServerFailureRestoresInFull: a page server that fails during the restore (here
// it reads a copy of the images whose pages files are empty) cuts that restore off at once,
// not at CRIU's bound: the gateway is restored in full instead, and its status says why.
func TestPageServerFailureRestoresInFull(t *testing.T) {
	real := criuPath(t)
	// The page server of an agent's checkpoint (not the start's test checkpoint) reads the
	// cut copy; the restore itself reads the real images.
	wrapper := filepath.Join(t.TempDir(), "criu")
	script := `#!/bin/sh
if [ "$1" = lazy-pages ] && [ "$2" = -D ]; then
	case "$3" in */.checkpoint-probe-*) exec ` + real + ` "$@";; esac
	rm -rf "$3.cut" && cp -a "$3" "$3.cut" || exit 1
	for f in "$3.cut"/pages-*.img; do : > "$f"; done
	images=$3
	shift 3
	exec ` + real + ` lazy-pages -D "$images.cut" "$@"
fi
exec ` + real + ` "$@"
`
	if err := os.WriteFile(wrapper, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	// A restore that waited for its page server would be cut off at this bound, and say so.
	f := checkpointing(t, func(o *local.Options) { o.CRIU, o.CRIUTimeout = wrapper, time.Minute })
	if ok, why := f.rt.LazyRestore(); !ok {
		testenv.Skip(t, "no lazy restores here: %s", why)
	}
	a := newAgent("ckpt-lazy-fails")
	d := ckptDesired("tok-1")
	o := waitPhase(t, f, a, d, runtime.PhaseRunning)
	r := suspendAndResume(t, f, a, d, nil)
	if r.Reason != agentsv1.ReasonRestoredFromCheckpoint || !strings.Contains(r.Message, local.RestoredInFull+": criu restore") ||
		!strings.Contains(r.Message, "(cut off: its page server failed)") || !strings.Contains(r.Message, "criu lazy-pages: exit status") ||
		strings.Contains(r.Message, "cut off after") {
		t.Fatalf("resume = %+v, want restored in full, cut off by its failed page server", r)
	}
	waitPhase(t, f, a, d, runtime.PhaseRunning)
	waitStatus(t, o.Endpoint, "tok-1", 404)
	if n := gatewayStarts(t, f, a, "[gateway] listening on"); n != 1 {
		t.Fatalf("the gateway started %d times, want once (restored, not restarted)", n)
	}
}

// restoredOnDemand fails t when r, a wake's status, says that its memory was restored in full
// on a runtime that restores it on demand: a restore on demand that failed (cut off, its page
// server ended) falls back to one in full, which a test of the wake alone would pass.
func restoredOnDemand(t *testing.T, f *fixture, r runtime.Observed) {
	t.Helper()
	if ok, _ := f.rt.LazyRestore(); ok && !strings.Contains(r.Message, local.RestoredOnDemand) {
		t.Fatalf("the wake's memory was not restored on demand: %s", r.Message)
	}
}
