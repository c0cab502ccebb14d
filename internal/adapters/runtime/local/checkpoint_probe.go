package local

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// probeCheckpoint checkpoints a trivial process (each CRIU run bounded as every other one) in a checkpointable sandbox, started as a
// gateway is (tini as the sandbox's PID 1, the seccomp filter, the per-home uid), restores
// it and checks that it runs again, in a temporary dir of the state dir. The runtime
// checkpoints suspended gateways only when this works: a CRIU that passes `criu check` but
// fails or hangs on a real tree (as CRIU 4.1 did where the hypervisor ignores hardware
// breakpoints) turns checkpoints off at start, with the reason, instead of failing every
// suspend.
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
	spec := sandboxSpec{home: home, dir: home, uid: warmUID, binary: "/bin/sh", args: []string{"-c", "exec sleep 1000000"},
		checkpoint: &checkpointSpec{tini: c.tini, log: filepath.Join(dir, logFileName)}}
	bin, args := r.sbx.wrap(spec)
	p, err := startProcess(launch{binary: bin, args: args, env: mergeEnv(map[string]string{"PATH": defaultPath}),
		dir: home, logPath: filepath.Join(dir, logFileName), sandboxed: true, dieWithManager: true})
	if err != nil {
		return err
	}
	defer stopProcess(context.Background(), p, 0, nil)
	init, err := probeSleeper(ctx, p, c.runTimeout())
	if err != nil {
		return fmt.Errorf("the test sandbox did not start: %w (%s)", err, lastLines(readTail(filepath.Join(dir, logFileName)), 2))
	}
	if err := c.dump(ctx, init.pid, images, root, args); err != nil {
		return err
	}
	init.killAndWait()
	pid, err := c.restore(ctx, images, root, nil)
	if err != nil {
		return err
	}
	restored := procRef{pid: pid}
	if st, err := readProcStat(pid); err == nil {
		restored.start = st.start
	}
	defer restored.killAndWait()
	if !slicesContainComm(childPIDs(pid), "sleep") {
		return errors.New("the restored test sandbox does not run its process")
	}
	return nil
}

// probeSleeper waits until the test sandbox bwrap (p) made runs its sleep under tini, and
// returns the sandbox's init.
func probeSleeper(ctx context.Context, p *process, within time.Duration) (procRef, error) {
	ctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	for {
		if init := sandboxInit(p.pid); init.pid != 0 && slicesContainComm(childPIDs(init.pid), "sleep") {
			return init, nil
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

// slicesContainComm tells whether one of pids runs a program named comm.
func slicesContainComm(pids []int, comm string) bool {
	for _, pid := range pids {
		if b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/comm"); err == nil && strings.TrimSpace(string(b)) == comm {
			return true
		}
	}
	return false
}

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
	if err := r.probeCheckpoint(context.Background(), c); err != nil {
		r.noCheckpoint = "a test checkpoint of a sandboxed process failed: " + err.Error()
		return
	}
	r.ckpt = c
}
