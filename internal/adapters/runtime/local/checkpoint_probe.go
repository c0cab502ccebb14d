package local

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/agentplane/agentplane/internal/adapters/runtime/local/lockprobe"
)

// probeCheckpoint checkpoints a trivial process (each CRIU run bounded as every other one) in a
// checkpointable sandbox, started as a gateway is (tini as the sandbox's PID 1, the seccomp
// filter, the per-home uid), restores it and checks that it runs again and still holds its
// file lock, in a temporary dir of the state dir. The process is this executable as the lock
// probe (package lockprobe): it holds a file of its home as SQLite holds a WAL index, mapped
// and read-locked. The runtime checkpoints suspended gateways only when this works: a CRIU
// that passes `criu check` but fails or hangs on a real tree (as CRIU 4.1 did where the
// hypervisor ignores hardware breakpoints), or restores a process without the locks it held
// on the files it maps (CRIU 4.1.1 without hack/criu/patches/0004: a restored gateway's
// database then lost its WAL index under it), turns checkpoints off at start, with the
// reason, instead of failing every suspend.
func (r *Runtime) probeCheckpoint(ctx context.Context, c *checkpointer) (err error) {
	dir, err := os.MkdirTemp(r.opts.StateDir, ".checkpoint-probe-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	home, root, images := filepath.Join(dir, "home"), filepath.Join(dir, sandboxRootName), filepath.Join(dir, checkpointDirName)
	if err := os.Mkdir(home, 0o700); err != nil {
		return err
	}
	if err := os.Chown(home, warmUID, warmUID); err != nil {
		return err
	}
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	held := filepath.Join(home, "probe.db-shm")
	if err := os.WriteFile(held, make([]byte, lockprobe.Size), 0o600); err != nil {
		return err
	}
	if err := os.Chown(held, warmUID, warmUID); err != nil {
		return err
	}
	spec := sandboxSpec{home: home, dir: home, uid: warmUID, binary: exe, readOnly: []string{exe},
		checkpoint: &checkpointSpec{tini: c.tini, log: filepath.Join(dir, logFileName)}}
	bin, args := r.sbx.wrap(spec)
	p, err := startProcess(launch{binary: bin, args: args, env: mergeEnv(map[string]string{"PATH": defaultPath, lockprobe.Env: held}),
		dir: home, logPath: filepath.Join(dir, logFileName), sandboxed: true, dieWithManager: true})
	if err != nil {
		return err
	}
	defer stopProcess(context.Background(), p, 0, nil)
	init, err := probeHolder(ctx, p, held, c.runTimeout())
	if err != nil {
		return fmt.Errorf("the test sandbox did not start: %w (%s)", err, lastLines(readTail(filepath.Join(dir, logFileName)), 2))
	}
	if err := c.dump(ctx, init.pid, images, root, args, clockRuns); err != nil {
		return err
	}
	init.killAndWait()
	var pid int
	if c.eager == "" {
		var lp *lazyPages
		if pid, lp, err = c.restoreLazily(ctx, r, images, root, nil); err == nil {
			<-lp.done // bounded: a CRIU run's bound
			err = lp.failure()
		}
		if err != nil {
			return fmt.Errorf("%w: %w", errLazyProbe, err)
		}
	} else if pid, err = c.restore(ctx, images, root, nil); err != nil {
		return err
	}
	restored := procRef{pid: pid}
	if st, err := readProcStat(pid); err == nil {
		restored.start = st.start
	}
	defer restored.killAndWait()
	if len(childPIDs(pid)) == 0 {
		return errors.New("the restored test sandbox does not run its process")
	}
	ok, err := lockprobe.Held(held)
	if err != nil {
		return fmt.Errorf("cannot read the restored test process's lock: %w", err)
	}
	if !ok {
		return errors.New("the restored test process does not hold the lock it held on a file it maps: " +
			"a restored gateway would lose SQLite's lock on its WAL index (CRIU 4.1.1 needs hack/criu/patches/0004)")
	}
	return nil
}

// probeHolder waits until the process in the test sandbox bwrap (p) made holds its lock on held
// (package lockprobe), and returns the sandbox's init.
func probeHolder(ctx context.Context, p *process, held string, within time.Duration) (procRef, error) {
	ctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	for {
		if init := sandboxInit(p.pid); init.pid != 0 {
			if ok, err := lockprobe.Held(held); err == nil && ok {
				return init, nil
			}
		}
		select {
		case <-p.exited:
			return procRef{}, fmt.Errorf("it ended with %s", p.exitDesc)
		case <-ctx.Done():
			return procRef{}, ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// errLazyProbe is a test checkpoint whose lazy restore failed.
var errLazyProbe = errors.New("a lazy restore of the test checkpoint failed")

// readTail is the end of the file at path (nil when it cannot be read).
func readTail(path string) []byte {
	b, _ := os.ReadFile(path)
	if len(b) > 4096 {
		b = b[len(b)-4096:]
	}
	return b
}

// useCheckpointer sets the runtime's checkpointer to c once its test checkpoint passed, and
// otherwise records why suspended gateways are not checkpointed.
func (r *Runtime) useCheckpointer(c *checkpointer, why string) {
	if c == nil {
		r.noCheckpoint = why
		return
	}
	c.merge = r.opts.MemoryMerge
	switch {
	case r.opts.EagerRestore:
		c.eager = "EagerRestore is set"
	default:
		c.eager = lazyWhy(context.Background(), c.criu)
	}
	err := r.probeCheckpoint(context.Background(), c)
	if errors.Is(err, errLazyProbe) {
		// Checkpoints work without lazy restores: the probe again, restoring in full.
		c.eager = err.Error()
		err = r.probeCheckpoint(context.Background(), c)
	}
	if err != nil {
		r.noCheckpoint = "a test checkpoint of a sandboxed process failed: " + err.Error()
		return
	}
	r.ckpt = c
}
