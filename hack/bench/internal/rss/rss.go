// Package rss reads a process's resident set size for the benchmarks.
package rss

import (
	"os"
	"strconv"
	"strings"
)

// MiB is the resident set size of process pid ("self" for this process) in MiB, from
// /proc/<pid>/status; 0 when it cannot be read.
func MiB(pid string) float64 { return kiBField("/proc/"+pid+"/status", "VmRSS:") / 1024 }

// PssMiB is the proportional set size of process pid (shared pages split between their
// users) in MiB, from /proc/<pid>/smaps_rollup; 0 when it cannot be read.
func PssMiB(pid string) float64 { return kiBField("/proc/"+pid+"/smaps_rollup", "Pss:") / 1024 }

// kiBField is the number after prefix on a line of file (kB in /proc's files); 0 when none.
func kiBField(file, prefix string) float64 {
	raw, err := os.ReadFile(file)
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if rest, ok := strings.CutPrefix(line, prefix); ok {
			if f := strings.Fields(rest); len(f) > 0 {
				kb, _ := strconv.ParseFloat(f[0], 64)
				return kb
			}
		}
	}
	return 0
}
