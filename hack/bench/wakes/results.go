package main

import (
	"fmt"

	"github.com/agentplane/agentplane/hack/bench/internal/benchkit"
	"github.com/agentplane/agentplane/hack/bench/internal/report"
)

// results are kind r's rows: its answers from asleep against awake, its suspends, and its
// messages late, lost and doubled.
func results(r *cycler, cycles int, version string, late, lost, doubled int) []report.Result {
	row := fmt.Sprintf("%s, engine %s", r.k.name, version)
	sample := fmt.Sprintf("%d cycles, the kinds side by side: %d answers from asleep, %d awake", cycles, len(r.asleep), len(r.awake))
	if r.sleep > 0 {
		sample += fmt.Sprintf(", each message asleep %s after the suspend", r.sleep)
	}
	sent := fmt.Sprintf("%d messages sent over %d cycles", r.sent, cycles)
	p := benchkit.Percentile
	asleepP50, awakeP50, asleepP99, awakeP99 := p(r.asleep, 50), p(r.awake, 50), p(r.asleep, 99), p(r.awake, 99)
	fmt.Printf("\n%s\n  message to answer from asleep: p50 %.2f s, p99 %.2f s; awake: p50 %.2f s, p99 %.2f s; suspend p50 %.2f s\n",
		row, asleepP50, asleepP99, awakeP50, awakeP99, p(r.suspend, 50))
	fmt.Printf("  %s: answered late %d, lost %d, doubled %d\n", sent, late, lost, doubled)
	const awake = "the same agent's answers awake, in the same cycles"
	return []report.Result{
		{Bench: "wakes", Row: row, Metric: "channel message to answer from asleep, p50", Value: asleepP50, Unit: "s",
			Baseline: awake + ", p50", BaselineValue: awakeP50, Ratio: asleepP50 / awakeP50, RatioOf: "asleep / awake; target: at most 1.5 s from asleep", Settings: sample},
		{Bench: "wakes", Row: row, Metric: "channel message to answer from asleep, p99", Value: asleepP99, Unit: "s",
			Baseline: awake + ", p99", BaselineValue: awakeP99, Ratio: asleepP99 / awakeP99, RatioOf: "asleep / awake", Settings: sample},
		{Bench: "wakes", Row: row, Metric: "suspend (POST /suspend, the gateway checkpointed), p50", Value: p(r.suspend, 50), Unit: "s", Settings: sample},
		{Bench: "wakes", Row: row, Metric: fmt.Sprintf("messages answered late (after %s)", answerBound), Value: float64(late), Unit: "messages", Settings: sent},
		{Bench: "wakes", Row: row, Metric: fmt.Sprintf("messages lost (not answered %s after the cycles)", lateBound), Value: float64(lost), Unit: "messages", RatioOf: "target: 0", Settings: sent},
		{Bench: "wakes", Row: row, Metric: "messages doubled (answered more than once)", Value: float64(doubled), Unit: "messages", RatioOf: "target: 0", Settings: sent},
	}
}
