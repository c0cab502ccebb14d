package local

import (
	"fmt"
	"os/exec"

	"github.com/agentplane/agentplane/internal/adapters/runtime/local/memmerge"
)

// Memory merging (Options.MemoryMerge): each gateway is started, and each checkpointed one
// restored, through package memmerge, which marks the process's memory mergeable before it
// execs bwrap (or CRIU, whose restored tree inherits the mark): every process of the gateway's
// sandbox is then marked, and the kernel's daemon may keep one copy of a page that several
// agents' gateways hold alike (the engine's code and data, a template's pages its copies
// still share). Nothing else is marked: not the manager, not the engine CLI's short runs, not
// the template's own gateway (only its copies run as agents).
//
// What it lets an agent reach: nothing it could not before, but it can learn more. A write to
// a merged page takes a copy-on-write fault, so an agent that times its writes learns whether
// another gateway holds a page of the same bytes (a side channel known from KSM's use between
// virtual machines). That is why it is off unless the platform team turns it on.

// setupMemoryMerge checks, with MemoryMerge, that this kernel keeps a started program's mark
// (memmerge.Check), and logs whether the kernel's daemon merges.
func (r *Runtime) setupMemoryMerge() error {
	if !r.opts.MemoryMerge {
		return nil
	}
	off, err := memmerge.Check()
	if err != nil {
		return fmt.Errorf("local runtime: memory merging: %w", err)
	}
	if off != "" {
		r.opts.Log.Info("gateways' memory is marked mergeable, but nothing is merged", "why", off)
	} else {
		r.opts.Log.Info("gateways' memory is merged by the kernel's same-page merging (KSM)")
	}
	return nil
}

// mergeable makes cmd run its program, in its environment, with its memory marked mergeable
// (memmerge.Command).
func mergeable(cmd *exec.Cmd) error {
	bin, args, env, err := memmerge.Command(cmd.Path, cmd.Args[1:], cmd.Environ())
	if err != nil {
		return err
	}
	cmd.Path, cmd.Args, cmd.Env = bin, append([]string{bin}, args...), env
	return nil
}
