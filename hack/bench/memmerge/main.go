// Command memmerge measures what the kernel's same-page merging (KSM) would save on a
// platform's awake agents, the setting agentplane ships off (local.Options.MemoryMerge,
// --memory-merge: a merged page is a side channel between tenants):
//
//	go run ./hack/bench/memmerge -n 6   (root)
//
// It holds -n idle agents born from their engine's template on the local runtime with its
// shipped defaults as root (benchkit.StartPlatform), twice in one run: first with
// MemoryMerge on and the kernel's merging daemon running at -pages-to-scan pages every 20 ms,
// until the daemon has scanned the fleet -scans times after the agents settled; then, on a
// fresh platform, the same agents with the shipped default (MemoryMerge off, the daemon
// stopped), held idle as long. Each side measures, once held: the agents' memory (PSS, every
// process of every gateway, per agent), the available memory they took (per agent), and with
// merging what their processes merged and what the daemon's scans cost in CPU. The daemon's
// knobs are put back as they were at the end.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/agentplane/agentplane/hack/bench/internal/benchkit"
	"github.com/agentplane/agentplane/hack/bench/internal/report"
	"github.com/agentplane/agentplane/hack/bench/internal/rss"
	"github.com/agentplane/agentplane/internal/adapters/runtime/local/memmerge"
	"github.com/agentplane/agentplane/internal/platform"
)

// options are the flags.
type options struct {
	n, pagesToScan, scans int
	settle, scanBound     time.Duration
	// side and heldFor run one side in this process (each side's platform runs in a process
	// of its own: controller-runtime refuses a second manager's controllers of the same names
	// in one process), its figures written as JSON to sideOut.
	side, sideOut string
	heldFor       time.Duration
}

func main() {
	var o options
	flag.IntVar(&o.n, "n", 6, "awake idle agents held on each side")
	flag.IntVar(&o.pagesToScan, "pages-to-scan", 2000, "the merging daemon's pages per 20 ms while merging (the kernel's default is 100: a fleet's first merge would take many minutes)")
	flag.IntVar(&o.scans, "scans", 3, "the daemon's full scans of the fleet after it settled before the merged side is measured (the second merges what the first saw)")
	flag.DurationVar(&o.settle, "settle", time.Minute, "idle time after the last agent runs before either side is measured or scanned")
	flag.DurationVar(&o.scanBound, "scan-bound", 20*time.Minute, "the most the merged side waits for its scans")
	flag.StringVar(&o.side, "side", "", "(run by the benchmark itself) hold one side only: merged or plain")
	flag.StringVar(&o.sideOut, "side-out", "", "(run by the benchmark itself) where -side writes its figures")
	flag.DurationVar(&o.heldFor, "held-for", 0, "(run by the benchmark itself) how long -side plain holds its agents")
	jsonOut := report.Flag()
	flag.Parse()
	if o.side != "" {
		benchkit.Main("", func(ctx context.Context) ([]report.Result, error) { return nil, oneSide(ctx, o) })
		return
	}
	benchkit.Main(*jsonOut, func(ctx context.Context) ([]report.Result, error) { return run(ctx, o) })
}

// side is one side's figures.
type side struct {
	PSS, RSS, Avail float64 // MiB per agent
	Merging         float64 // MiB per agent its processes merged
	KSMDCPU         float64 // seconds of the daemon's CPU while held
	Held            time.Duration
	Scans           int64
	Version         string // the engine's
}

func run(ctx context.Context, o options) ([]report.Result, error) {
	if o.n < 2 || o.scans < 2 || o.pagesToScan < 1 {
		return nil, errors.New("want -n >= 2, -scans >= 2, -pages-to-scan >= 1")
	}
	if os.Geteuid() != 0 {
		return nil, errors.New("the merging daemon's knobs, CRIU and the templates need root")
	}
	if _, err := memmerge.Check(); err != nil {
		return nil, err
	}
	restore, err := saveKSM()
	if err != nil {
		return nil, err
	}
	defer restore()
	merged, err := runSide(ctx, o, "merged", 0)
	if err != nil {
		return nil, fmt.Errorf("merged side: %w", err)
	}
	plain, err := runSide(ctx, o, "plain", merged.Held)
	if err != nil {
		return nil, fmt.Errorf("unmerged side: %w", err)
	}
	return results(o, merged, plain), nil
}

// runSide runs this program on one side (oneSide) and reads its figures.
func runSide(ctx context.Context, o options, name string, heldFor time.Duration) (s side, err error) {
	self, err := os.Executable()
	if err != nil {
		return s, err
	}
	out, err := os.CreateTemp("", "agentplane-bench-memmerge-*.json")
	if err != nil {
		return s, err
	}
	_ = out.Close()
	defer os.Remove(out.Name())
	cmd := exec.CommandContext(ctx, self, "-n", strconv.Itoa(o.n), "-pages-to-scan", strconv.Itoa(o.pagesToScan),
		"-scans", strconv.Itoa(o.scans), "-settle", o.settle.String(), "-scan-bound", o.scanBound.String(),
		"-side", name, "-side-out", out.Name(), "-held-for", heldFor.String())
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	// Interrupted, the side stops its platform (its gateways) before it exits.
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = 2 * time.Minute
	if err := cmd.Run(); err != nil {
		return s, err
	}
	b, err := os.ReadFile(out.Name())
	if err == nil {
		err = json.Unmarshal(b, &s)
	}
	return s, err
}

// oneSide holds one side (o.side) and writes its figures to o.sideOut.
func oneSide(ctx context.Context, o options) error {
	if o.side != "merged" && o.side != "plain" {
		return fmt.Errorf("-side %q: want merged or plain", o.side)
	}
	s, err := hold(ctx, o, o.side == "merged", o.heldFor)
	if err != nil {
		return err
	}
	b, err := json.Marshal(s)
	if err != nil {
		return err
	}
	return os.WriteFile(o.sideOut, b, 0o644)
}

// hold starts a platform with MemoryMerge as merge, holds o.n idle agents on it and measures
// them: with merge once the daemon has scanned them o.scans times, without once they have
// been held as long as heldFor.
func hold(ctx context.Context, o options, merge bool, heldFor time.Duration) (s side, err error) {
	run := "0"
	if merge {
		if err := setKSM("pages_to_scan", strconv.Itoa(o.pagesToScan)); err != nil {
			return s, err
		}
		if err := setKSM("sleep_millisecs", "20"); err != nil {
			return s, err
		}
		run = "1"
	}
	if err := setKSM("run", run); err != nil {
		return s, err
	}
	b, err := benchkit.StartPlatform(ctx, "memmerge", platform.ChannelRelayOptions{},
		func(r *platform.RuntimeOptions) { r.MemoryMerge = merge })
	if err != nil {
		return s, err
	}
	defer func() { b.Stop(err) }()
	fmt.Printf("MemoryMerge %v: %d agents on engine %s\n", merge, o.n, b.Version)
	availBefore := benchkit.MemAvailableMiB()
	for i := range o.n {
		body, err := b.Client.Expect("POST", "/v0/agents", map[string]any{"name": fmt.Sprintf("merge-%d", i)}, 201)
		if err != nil {
			return s, err
		}
		id, _, err := benchkit.AgentOf(body)
		if err != nil {
			return s, err
		}
		if err := b.Client.WaitStatus(ctx, id, "running", 5*time.Minute); err != nil {
			return s, err
		}
	}
	if err := benchkit.Sleep(ctx, o.settle); err != nil {
		return s, err
	}
	start, scans0, cpu0 := time.Now(), ksmCounter("full_scans"), ksmdCPU()
	if merge {
		for ksmCounter("full_scans")-scans0 < int64(o.scans) {
			if time.Since(start) > o.scanBound {
				return s, fmt.Errorf("the daemon scanned %d times in %s, want %d", ksmCounter("full_scans")-scans0, o.scanBound, o.scans)
			}
			if err := benchkit.Sleep(ctx, time.Second); err != nil {
				return s, err
			}
		}
	} else if err := benchkit.Sleep(ctx, heldFor); err != nil {
		return s, err
	}
	s.Held, s.Scans, s.KSMDCPU, s.Version = time.Since(start), ksmCounter("full_scans")-scans0, ksmdCPU()-cpu0, b.Version
	pids := benchkit.AgentPIDs(func(home string) bool { return strings.HasPrefix(home, b.State+"/") })
	if len(pids) < o.n {
		return s, fmt.Errorf("%d gateway processes for %d agents", len(pids), o.n)
	}
	for _, pid := range pids {
		// The setting is what is compared: every process of every gateway has it as the side does.
		n, _ := strconv.Atoi(pid)
		if marked, err := memmerge.Marked(n); err != nil || marked != merge {
			return s, fmt.Errorf("gateway process %s marked mergeable: %v (%v), want %v", pid, marked, err, merge)
		}
		s.PSS += rss.PssMiB(pid) / float64(o.n)
		s.RSS += rss.MiB(pid) / float64(o.n)
	}
	s.Merging = mergingMiB(pids) / float64(o.n)
	s.Avail = (availBefore - benchkit.MemAvailableMiB()) / float64(o.n)
	fmt.Printf("  per agent: PSS %.0f MiB, RSS %.0f MiB, available memory taken %.0f MiB, merged %.0f MiB; held %s, %d full scans, ksmd %.1f CPU-s\n",
		s.PSS, s.RSS, s.Avail, s.Merging, s.Held.Round(time.Second), s.Scans, s.KSMDCPU)
	return s, nil
}

// results are the run's rows.
func results(o options, on, off side) []report.Result {
	row := fmt.Sprintf("%d awake idle agents born from the template, engine %s", o.n, on.Version)
	const base = "the same agents unmerged (MemoryMerge off, as shipped), held as long"
	settings := fmt.Sprintf("MemoryMerge on (shipped: off); KSM pages_to_scan %d every 20 ms (kernel default: 100); %d full scans in %s", o.pagesToScan, on.Scans, on.Held.Round(time.Second))
	return []report.Result{
		{Bench: "memmerge", Row: row, Metric: "memory per agent (PSS, every process of its gateway), merged", Value: on.PSS, Unit: "MiB",
			Baseline: base, BaselineValue: off.PSS, Ratio: on.PSS / off.PSS, RatioOf: "merged / unmerged", Settings: settings},
		{Bench: "memmerge", Row: row, Metric: "available memory taken per agent, merged", Value: on.Avail, Unit: "MiB",
			Baseline: base, BaselineValue: off.Avail, Ratio: on.Avail / off.Avail, RatioOf: "merged / unmerged", Settings: settings},
		{Bench: "memmerge", Row: row, Metric: "memory per agent its gateway's pages merged (ksm_merging_pages)", Value: on.Merging, Unit: "MiB",
			Baseline: "its RSS", BaselineValue: on.RSS, Ratio: on.Merging / on.RSS, RatioOf: "merged / RSS", Settings: settings},
		{Bench: "memmerge", Row: row, Metric: "the merging daemon's CPU while it merged the fleet", Value: 100 * on.KSMDCPU / on.Held.Seconds(), Unit: "% of a core",
			Settings: settings},
	}
}
