package local

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"os"
	"strconv"
	"strings"
	"time"
)

// A dump waits, at most settleBound, for the sandbox to be idle for settleQuiet: no process
// started or ended, its processes used at most settleCPU of a CPU, no data waits in the
// sockets of its network namespace and nothing outside holds it mid-call (Options.Busy: the
// channel relay's sends, which a dump would cut and the restored engine send again). A dump
// taken in the middle of the engine's work restores a gateway that cannot go on: OpenClaw
// spawns commands through a broker process that hands each child's pipes to the gateway over
// a Node IPC channel, and a gateway dumped with such a handle in flight aborts at once on
// restore (`LibuvStreamWrap::OnUvRead`: `(type) == (UV_UNKNOWN_HANDLE)`, seen on openclaw
// 2026.9.6 when a suspend met its `npm root -g`); one dumped while its SQLite workers were
// busy with a job just added came back healthy but never ran the job nor stopped on SIGTERM.
// A sandbox busy for longer (an agent's long command) is dumped all the same.
const (
	settleQuiet = 500 * time.Millisecond
	settleBound = 10 * time.Second
	settleCPU   = 0.1
	// clockTicks is USER_HZ, the unit of /proc/<pid>/stat's times (100 on Linux).
	clockTicks = 100
)

// settle waits until the process tree under init has been idle for quiet (no process
// started or ended, at most maxCPU of a CPU used, no data waiting on its network namespace's
// TCP sockets, and busy, when set, false), or bound has passed, or ctx ends. It says whether
// the tree settled.
func settle(ctx context.Context, init int, quiet, bound time.Duration, maxCPU float64, busy func() bool) bool {
	sockets := ownNetns(init)
	return settleTree(ctx, func() (map[int]uint64, uint64) { return treeOf(init) }, func() bool {
		return (busy != nil && busy()) || (sockets && socketsPending(init))
	}, quiet, bound, maxCPU)
}

// settleTree is settle over the tree that read reports (its processes' start times by pid
// and their CPU time in clock ticks) and what else busy says holds it.
func settleTree(ctx context.Context, read func() (map[int]uint64, uint64), busy func() bool, quiet, bound time.Duration, maxCPU float64) bool {
	const tick = 100 * time.Millisecond
	deadline := time.Now().Add(bound)
	last, sinceCPU := read()
	since := time.Now()
	for time.Now().Before(deadline) {
		select {
		case <-ctx.Done():
			return false
		case <-time.After(tick):
		}
		now, cpu := read()
		working := float64(cpu-sinceCPU)/clockTicks > maxCPU*time.Since(since).Seconds()+0.01
		if !maps.Equal(now, last) || working || busy() {
			last, since, sinceCPU = now, time.Now(), cpu
			continue
		}
		if time.Since(since) >= quiet {
			return true
		}
	}
	return false
}

// treeOf is the process tree under pid (pid included), each process's start time by pid,
// and the CPU time its processes have used, in clock ticks.
func treeOf(pid int) (map[int]uint64, uint64) {
	tree, cpu := map[int]uint64{}, uint64(0)
	for todo := []int{pid}; len(todo) > 0; {
		p := todo[len(todo)-1]
		todo = todo[:len(todo)-1]
		st, err := readProcStat(p)
		if err != nil || st.state == 'Z' || st.state == 'X' {
			continue
		}
		tree[p], cpu = st.start, cpu+st.cpu
		todo = append(todo, childPIDs(p)...)
	}
	return tree, cpu
}

// busy reports whether something outside the gateway holds it mid-call (Options.Busy).
func (a *agent) busy() bool {
	return a.rt.opts.Busy != nil && a.rt.opts.Busy(a.key)
}

// ownNetns reports whether pid has a network namespace other than the manager's: only there
// are its sockets the gateway's alone (in the host's, every socket of the host would count).
func ownNetns(pid int) bool {
	own, err := netNSOf(strconv.Itoa(pid))
	host, herr := hostNetNS()
	return err == nil && herr == nil && own != host
}

// socketsPending reports whether a TCP socket of pid's network namespace holds data: bytes
// its process has not read yet, or has written and its peer not yet acknowledged. A gateway
// dumped then loses them (CRIU's --tcp-close): an answer the relay wrote and the engine had
// not read is retried after the restore, and a message sent that way twice.
func socketsPending(pid int) bool {
	for _, table := range []string{"tcp", "tcp6"} {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/net/%s", pid, table))
		if err == nil && len(queuedSockets(b)) > 0 {
			return true
		}
	}
	return false
}

// queuedSockets are the local addresses (as the table writes them, "0100007F:1F90") of the
// sockets of a /proc/net/tcp or tcp6 table whose queues hold data: its tx_queue:rx_queue
// column is not all zeros (a listening socket's rx_queue is its backlog of connections not
// yet accepted).
func queuedSockets(table []byte) []string {
	var out []string
	for i, l := range bytes.Split(table, []byte("\n")) {
		f := strings.Fields(string(l))
		if i == 0 || len(f) < 5 {
			continue // the header, or the empty last line
		}
		tx, rx, ok := strings.Cut(f[4], ":")
		if ok && (strings.Trim(tx, "0") != "" || strings.Trim(rx, "0") != "") {
			out = append(out, f[1])
		}
	}
	return out
}
