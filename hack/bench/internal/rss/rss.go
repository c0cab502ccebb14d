// Package rss reads a process's resident set size for the benchmarks.
package rss

import (
	"os"
	"strconv"
	"strings"
)

// MiB is the resident set size of process pid ("self" for this process) in MiB, from
// /proc/<pid>/status; 0 when it cannot be read.
func MiB(pid string) float64 {
	raw, err := os.ReadFile("/proc/" + pid + "/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			if f := strings.Fields(rest); len(f) > 0 {
				kb, _ := strconv.ParseFloat(f[0], 64)
				return kb / 1024
			}
		}
	}
	return 0
}
