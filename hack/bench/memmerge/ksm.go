package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/agentplane/agentplane/hack/bench/internal/benchkit"
)

// ksmDir holds the kernel's same-page merging knobs and counters.
const ksmDir = "/sys/kernel/mm/ksm"

// pageMiB is a page's size in MiB.
var pageMiB = float64(os.Getpagesize()) / (1 << 20)

// ksmKnobs are the knobs the benchmark sets, restored at its end.
var ksmKnobs = []string{"run", "pages_to_scan", "sleep_millisecs"}

// saveKSM reads the knobs; restore writes them back (run last: merging stops only once the
// scan rate is the machine's own again).
func saveKSM() (restore func(), err error) {
	saved := map[string]string{}
	for _, k := range ksmKnobs {
		b, err := os.ReadFile(filepath.Join(ksmDir, k))
		if err != nil {
			return nil, err
		}
		saved[k] = strings.TrimSpace(string(b))
	}
	return func() {
		for i := len(ksmKnobs) - 1; i >= 0; i-- {
			if err := setKSM(ksmKnobs[i], saved[ksmKnobs[i]]); err != nil {
				fmt.Fprintln(os.Stderr, "restoring KSM:", err)
			}
		}
	}, nil
}

// setKSM writes one knob.
func setKSM(knob, value string) error {
	return os.WriteFile(filepath.Join(ksmDir, knob), []byte(value), 0o644)
}

// ksmCounter reads one of the kernel's KSM counters.
func ksmCounter(name string) int64 {
	b, _ := os.ReadFile(filepath.Join(ksmDir, name))
	n, _ := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	return n
}

// ksmdCPU is the CPU time (seconds) the kernel's merging thread has used, or -1 when it is not
// found.
func ksmdCPU() float64 {
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		comm, err := os.ReadFile("/proc/" + e.Name() + "/comm")
		if err != nil || strings.TrimSpace(string(comm)) != "ksmd" {
			continue
		}
		stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			return -1
		}
		s := string(stat)
		// After the command: field 3 is f[0]; utime and stime are fields 14 and 15.
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		utime, _ := strconv.ParseFloat(f[11], 64)
		stime, _ := strconv.ParseFloat(f[12], 64)
		return (utime + stime) / 100 // USER_HZ
	}
	return -1
}

// mergingMiB sums what the processes pids have merged (ksm_merging_pages in their ksm_stat).
func mergingMiB(pids []string) float64 {
	total := 0.0
	for _, pid := range pids {
		total += float64(benchkit.ProcField("/proc/"+pid+"/ksm_stat", "ksm_merging_pages")) * pageMiB
	}
	return total
}
