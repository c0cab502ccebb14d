package local

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
)

// A waking gateway's memory is restored on demand. CRIU's restore with --lazy-pages makes
// the processes, their files and their mappings, and registers their anonymous private memory
// (nearly all of a Node gateway's: its heaps) with userfaultfd; a page server of the same
// CRIU (criu lazy-pages, one per restore) serves each page when a thread first touches it
// and copies all the others in the background, then ends. So the gateway runs again once its
// processes exist, not once its whole memory is copied. Measured here (a gateway of the
// pinned engine with a Telegram channel, about 850 MiB of pages): the restore took 4.1-4.5 s
// eagerly and 0.48-0.58 s lazily, the page server ending 1.7-3.1 s later; on this VM a fresh
// page costs about 13 µs to fault in, so copying every page first is most of a wake.
//
// While the page server runs, the checkpoint is its source: it is removed, and the gateway
// checkpointed again, only once the server has ended (lazyPages.done). A page server that
// fails leaves the gateway with pages it cannot have: the gateway is killed, which counts as
// a failed restore (restoredGrace), and it starts anew.

// lazyPages is the page server of one lazily restored gateway.
type lazyPages struct {
	done chan struct{} // closed once the server ended and the checkpoint was removed
	// failed is why the server failed while its gateway ran, set before the gateway is
	// killed for it (nil: every page was copied).
	failed atomic.Pointer[error]
}

// failure is why the page server failed its running gateway (nil: it did not, or not yet).
func (lp *lazyPages) failure() error {
	if lp == nil {
		return nil
	}
	if err := lp.failed.Load(); err != nil {
		return *err
	}
	return nil
}

// errPageServerFailed cuts off a restore whose page server failed.
var errPageServerFailed = errors.New("its page server failed")

// lazyWait bounds how long a suspend waits for the page server of the gateway's restore to
// end before it checkpoints the gateway again (it stops the gateway instead): the server
// copies a gateway's pages within seconds.
const lazyWait = time.Minute

// lazyWhy is why this CRIU cannot restore lazily on this kernel ("" when it can): the page
// server needs userfaultfd with its non-cooperative events (the restored tree forks and
// remaps while pages are still missing); CRIU's check of those checks userfaultfd first.
func lazyWhy(ctx context.Context, criu string) string {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if out, err := exec.CommandContext(ctx, criu, "check", "--feature", "uffd-noncoop").CombinedOutput(); err != nil {
		return fmt.Sprintf("criu check --feature uffd-noncoop: %v: %s", err, lastLines(out, 2))
	}
	return ""
}

// pageServer is a running page server (criu lazy-pages, or any command in tests).
type pageServer struct {
	cmd    *exec.Cmd
	exited chan struct{} // closed once it ended; err is then how
	err    error
}

// startPageServer starts cmd and watches for its end.
func startPageServer(cmd *exec.Cmd) (*pageServer, error) {
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	s := &pageServer{cmd: cmd, exited: make(chan struct{})}
	go func() {
		s.err = cmd.Wait()
		close(s.exited)
	}()
	return s, nil
}

// kill ends the server and waits for it.
func (s *pageServer) kill() {
	_ = s.cmd.Process.Kill()
	<-s.exited
}

// startLazyPages starts the page server of the checkpoint in images, its socket, log and
// pid in work, and returns once it listens. Its own process group: a signal to the manager's
// group does not end it in the middle of a copy.
func (c *checkpointer) startLazyPages(ctx context.Context, images, work string) (*pageServer, error) {
	if err := os.Remove(filepath.Join(work, "lazy-pages.socket")); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	ready, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	defer ready.Close()
	cmd := exec.Command(c.criu, "lazy-pages", "-D", images, "-W", work, "-o", "lazy-pages.log", "--status-fd", "3")
	cmd.ExtraFiles = []*os.File{w}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	s, err := startPageServer(cmd)
	_ = w.Close()
	if err != nil {
		return nil, err
	}
	// CRIU writes one byte to the status fd once it listens, and closes it; a server that
	// ends first closes it with nothing written.
	got := make(chan bool, 1)
	go func() {
		b := make([]byte, 1)
		n, _ := ready.Read(b)
		got <- n == 1
	}()
	timer := time.NewTimer(c.runTimeout())
	defer timer.Stop()
	select {
	case ok := <-got:
		if ok {
			return s, nil
		}
		err = errors.New("it ended before it listened")
	case <-timer.C:
		err = fmt.Errorf("it did not listen within %s", c.runTimeout())
	case <-ctx.Done():
		err = ctx.Err()
	}
	s.kill()
	return nil, fmt.Errorf("criu lazy-pages: %w%s", err, criuLogErrors(filepath.Join(work, "lazy-pages.log")))
}

// restoreLazily restores the checkpoint in dir as restore does, its memory on demand, and
// returns the page server that copies it. The server, once it ended, removes dir and closes
// its done; the runtime's Shutdown waits for it. A server that ends during the restore cuts
// the restore off at once (CRIU's restore would wait for it until its bound); on a failed
// restore the server is ended.
func (c *checkpointer) restoreLazily(ctx context.Context, r *Runtime, dir, root string, procs []string) (int, *lazyPages, error) {
	server, err := c.startLazyPages(ctx, dir, dir)
	if err != nil {
		return 0, nil, err
	}
	rctx, cancel := context.WithCancelCause(ctx)
	go func() {
		select {
		case <-server.exited:
			// One that copied every page may end before the restore does: that one is fine.
			if server.err != nil {
				cancel(errPageServerFailed)
			}
		case <-rctx.Done():
		}
	}()
	pid, err := c.restoreFrom(rctx, dir, root, dir, procs, "--lazy-pages")
	cancel(nil)
	if err != nil {
		server.kill()
		if server.err != nil {
			err = fmt.Errorf("%w: criu lazy-pages: %v%s", err, server.err, criuLogErrors(filepath.Join(dir, "lazy-pages.log")))
		}
		return 0, nil, err
	}
	lp := &lazyPages{done: make(chan struct{})}
	restored := procRef{pid: pid}
	if st, err := readProcStat(pid); err == nil {
		restored.start = st.start
	}
	r.lazyWG.Add(1)
	go func() {
		defer r.lazyWG.Done()
		lp.serve(server, c.runTimeout(), restored, filepath.Join(dir, "lazy-pages.log"))
		if err := os.RemoveAll(dir); err != nil {
			r.opts.Log.Error(err, "cannot remove a restored checkpoint", "dir", dir)
		}
		close(lp.done)
	}()
	return pid, lp, nil
}

// serve waits for the page server of the gateway whose sandbox's init is restored to end, at
// most bound (then it is killed). A server that fails while its gateway runs leaves pages
// missing for good: the gateway is killed, and failure says why (with the errors of the
// server's log). A server whose gateway ended (stopped, deleted) may fail for it: that loses
// nothing.
func (lp *lazyPages) serve(server *pageServer, bound time.Duration, restored procRef, log string) {
	timer := time.NewTimer(bound)
	defer timer.Stop()
	var err error
	select {
	case <-server.exited:
		if server.err != nil {
			err = fmt.Errorf("criu lazy-pages: %w%s", server.err, criuLogErrors(log))
		}
	case <-timer.C:
		server.kill()
		err = fmt.Errorf("criu lazy-pages: cut off after %s", bound)
	}
	if err != nil && procAlive(restored.pid, restored.start) {
		lp.failed.Store(&err)
		restored.killAndWait()
	}
}

// criuLogErrors is ": " and the first error lines of the CRIU log at path ("" when none).
func criuLogErrors(path string) string {
	if errs := logErrorLines(path, 3); len(errs) > 0 {
		return ": " + strings.Join(errs, "; ")
	}
	return ""
}

// logErrorLines are the first n error lines of the CRIU log at path.
func logErrorLines(path string, n int) []string {
	b, _ := os.ReadFile(path)
	var errs []string
	for _, l := range strings.Split(string(b), "\n") {
		// This VM's root lacks CAP_SYS_RESOURCE: CRIU cannot raise its own open-file limit,
		// which it reports as an error and does without.
		if strings.Contains(l, "Error") && !strings.Contains(l, "RLIMIT_NOFILE for self") {
			errs = append(errs, strings.TrimSpace(l))
		}
	}
	return errs[:min(len(errs), n)]
}

// lazyDoneLocked waits, at most lazyWait, for the page server of the gateway's last restore
// and reports whether it has ended (true when there was none). A server that failed ended
// its gateway, whose exit says why (handleExitLocked).
func (a *agent) lazyDoneLocked(ctx context.Context) bool {
	lp := a.lazy
	if lp == nil {
		return true
	}
	timer := time.NewTimer(lazyWait)
	defer timer.Stop()
	select {
	case <-lp.done:
	case <-timer.C:
		return false
	case <-ctx.Done():
		return false
	}
	a.lazy = nil
	return true
}
