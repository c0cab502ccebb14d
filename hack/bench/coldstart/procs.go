package main

import (
	"os"
	"strconv"
	"strings"
	"syscall"

	"github.com/agentplane/agentplane/hack/bench/internal/rss"
)

// usage is what a gateway's processes hold and have used, summed over every process whose
// environment carries a marker (the gateway, its Node workers' processes, its spawn broker,
// which leaves the gateway's session, and, sandboxed, bwrap's monitor and init).
type usage struct {
	procs  int
	rssMiB float64 // VmRSS summed (shared pages, like the Node binary's, count in each process)
	pssMiB float64 // proportional set size summed (shared pages split between their users)
	cpuSec float64 // user+system time of the processes and of their children that exited
}

// marked returns the pids whose environment holds marker ("NAME=value").
func marked(marker string) []int {
	entries, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		env, err := os.ReadFile("/proc/" + e.Name() + "/environ")
		if err != nil {
			continue
		}
		for _, kv := range strings.Split(string(env), "\x00") {
			if kv == marker {
				out = append(out, pid)
				break
			}
		}
	}
	return out
}

// measure sums the usage of the processes marked with marker.
func measure(marker string) usage { return measurePids(marked(marker)) }

// measurePids sums the usage of pids.
func measurePids(pids []int) usage {
	var u usage
	tick := float64(100) // USER_HZ on Linux
	for _, pid := range pids {
		p := strconv.Itoa(pid)
		u.procs++
		u.rssMiB += rss.MiB(p)
		u.pssMiB += rss.PssMiB(p)
		if stat, err := os.ReadFile("/proc/" + p + "/stat"); err == nil {
			s := string(stat)
			if i := strings.LastIndexByte(s, ')'); i >= 0 {
				// After the command: field 3 is f[0]; utime, stime, cutime, cstime are 14-17.
				if f := strings.Fields(s[i+1:]); len(f) > 14 {
					for _, v := range f[11:15] {
						n, _ := strconv.ParseFloat(v, 64)
						u.cpuSec += n / tick
					}
				}
			}
		}
	}
	return u
}

// killMarked SIGKILLs every process marked with marker (what a stop left behind).
func killMarked(marker string) int {
	n := 0
	for _, pid := range marked(marker) {
		if syscall.Kill(pid, syscall.SIGKILL) == nil {
			n++
		}
	}
	return n
}
