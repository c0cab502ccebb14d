package local

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/go-logr/logr"

	"github.com/agentplane/agentplane/internal/adapters/archive"
)

// reapOrphans stops the gateways of a previous manager that no state.json records: that
// manager died after starting one and before writing its pid, so nothing would ever adopt or
// stop it (it would run beside the gateway the next Ensure starts, holding its port), and the
// warm pool members it left (pools are rebuilt from scratch), and a template or a copy of one
// it was making (templates.go, under StateDir). They are recognized by the
// marker in their environment (an agent's or a member's home under StateDir, which this
// runtime holds the lock of); processes in the group of an adopted gateway, or below it, are
// its own (a checkpointable sandbox runs the gateway in a session of its own: --new-session).
func (r *Runtime) reapOrphans() {
	adopted := map[int]bool{}
	r.mu.Lock()
	for _, a := range r.agents {
		a.mu.Lock()
		if a.proc != nil {
			adopted[a.proc.pid] = true
		}
		a.mu.Unlock()
	}
	r.mu.Unlock()
	var prefixes []string
	dirs := []string{"agents", poolDirName}
	if r.opts.TemplateDir == "" {
		// A template being made, and a copy of one that no agent records yet, carry the
		// marker of the template's home (a copy's memory is the template's).
		dirs = append(dirs, "templates")
	}
	for _, d := range dirs {
		prefixes = append(prefixes, MarkerEnv+"="+filepath.Join(r.opts.StateDir, d)+string(filepath.Separator))
	}
	forEachMarked(prefixes, func(pid int) {
		if adopted[pid] {
			return
		}
		st, err := readProcStat(pid)
		if err != nil || st.state == 'Z' || st.state == 'X' || descendsFrom(st, adopted) {
			return
		}
		r.opts.Log.Info("stopping a gateway no state records (its manager died while starting it)", "pid", pid)
		stopProcess(context.Background(), adoptProcess(pid, st.start, "", false), r.opts.StopTimeout, &r.opts.Log)
	})
}

// reapDeadWarmUps stops the compile-cache warm-ups of managers that died and removes their
// staging dirs in root. A manager flocks a warm-up's staging dir while the warm-up runs (the
// lock goes with its last fd), and the warm-up's processes carry the marker of a home in that
// dir: a dir whose lock can be taken belongs to no live manager (platforms on one host may
// share root), and whatever carries its marker is killed. (A sandbox's PID namespace init can
// outlive its killed parent: bwrap sets its --die-with-parent after it forked.)
func reapDeadWarmUps(root string, log logr.Logger) {
	entries, _ := os.ReadDir(root)
	for _, e := range entries {
		if !e.IsDir() || !strings.HasPrefix(e.Name(), warmingPrefix) {
			continue
		}
		dir := filepath.Join(root, e.Name())
		lock, err := tryLock(dir, os.O_RDONLY)
		if err != nil {
			continue // a live warm-up
		}
		forEachMarked([]string{MarkerEnv + "=" + dir + string(filepath.Separator)}, func(pid int) {
			log.Info("killing a compile-cache warm-up its manager left", "pid", pid, "dir", dir)
			killGroup(pid)
			_ = syscall.Kill(pid, syscall.SIGKILL)
		})
		_ = archive.RemoveAll(dir)
		_ = lock.Close()
	}
}

// forEachMarked calls fn with the pid of each process whose environment carries the marker
// with a home under one of prefixes (each "AGENTPLANE_AGENT_HOME=<dir>/").
func forEachMarked(prefixes []string, fn func(pid int)) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		environ, err := os.ReadFile("/proc/" + e.Name() + "/environ")
		if err == nil && hasMarker(string(environ), prefixes) {
			fn(pid)
		}
	}
}

// descendsFrom reports whether the process of st is a descendant of one of pids (or in the
// group of one), reading its ancestors from /proc.
func descendsFrom(st procStat, pids map[int]bool) bool {
	for range 64 {
		if pids[st.ppid] || pids[st.pgrp] {
			return true
		}
		if st.ppid <= 1 {
			return false
		}
		var err error
		if st, err = readProcStat(st.ppid); err != nil {
			return false
		}
	}
	return false
}

// hasMarker reports whether the environment block environ sets the marker to a home under one
// of prefixes (each "AGENTPLANE_AGENT_HOME=<dir>/").
func hasMarker(environ string, prefixes []string) bool {
	for _, p := range prefixes {
		if strings.HasPrefix(environ, p) || strings.Contains(environ, "\x00"+p) {
			return true
		}
	}
	return false
}
