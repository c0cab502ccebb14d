package main

import (
	"fmt"

	"github.com/agentplane/agentplane/hack/bench/internal/benchkit"
	"github.com/agentplane/agentplane/hack/bench/internal/report"
)

// results are the run's rows.
func results(o options, version string, m measured) []report.Result {
	row := fmt.Sprintf("%d agents, %d awake (%d busy), engine %s", o.n, o.awake, o.busy, version)
	const awakeBase = "the awake agents' answers in the same rounds"
	med := func(s []float64) float64 { return benchkit.Median(s, func(x float64) float64 { return x }) }
	asleepP50, awakeP50 := med(m.fromAsleep), med(m.fromAwake)
	asleepP99, awakeP99 := benchkit.Percentile(m.fromAsleep, 99), benchkit.Percentile(m.fromAwake, 99)
	allAwake := float64(o.n) * m.awakeRSS
	wakesPerSecond := 0.0
	if m.burstTook > 0 {
		wakesPerSecond = float64(m.burst) / m.burstTook
	}
	sent := fmt.Sprintf("%d messages sent", m.sent)
	sample := fmt.Sprintf("%d answers from asleep, %d awake", len(m.fromAsleep), len(m.fromAwake))
	fmt.Printf("\n%s\n  message to answer from asleep: p50 %.2f s, p99 %.2f s; awake: p50 %.2f s, p99 %.2f s (%s)\n",
		row, asleepP50, asleepP99, awakeP50, awakeP99, sample)
	fmt.Printf("  burst: %d wakes in %.1f s (%.2f wakes/s); messages answered late %d, lost %d, doubled %d\n", m.burst, m.burstTook, wakesPerSecond, m.late, m.lost, m.doubled)
	fmt.Printf("  memory held: %.0f MiB (all awake: %d x %.0f MiB = %.0f MiB); checkpoint per sleeping agent %.0f MiB, %.0f MiB compressed (whole %.0f MiB)\n",
		m.held, o.n, m.awakeRSS, allAwake, m.diskMiB, m.packedMiB, m.wholeMiB)
	return []report.Result{
		{Bench: "density", Row: row, Metric: "agents held", Value: float64(o.n), Unit: "agents"},
		{Bench: "density", Row: row, Metric: "channel message to answer from asleep, p50", Value: asleepP50, Unit: "s",
			Baseline: awakeBase + ", p50", BaselineValue: awakeP50, Ratio: asleepP50 / awakeP50, RatioOf: "asleep / awake; target: at most 1.5 s from asleep", Settings: sample},
		{Bench: "density", Row: row, Metric: "channel message to answer from asleep, p99", Value: asleepP99, Unit: "s",
			Baseline: awakeBase + ", p99", BaselineValue: awakeP99, Ratio: asleepP99 / awakeP99, RatioOf: "asleep / awake", Settings: sample},
		{Bench: "density", Row: row, Metric: fmt.Sprintf("messages answered late (after %s)", answerBound), Value: float64(m.late), Unit: "messages", Settings: sent},
		{Bench: "density", Row: row, Metric: fmt.Sprintf("messages lost (not answered %s after the burst)", lateBound+answerBound), Value: float64(m.lost), Unit: "messages", RatioOf: "target: 0", Settings: sent},
		{Bench: "density", Row: row, Metric: "messages doubled (answered more than once)", Value: float64(m.doubled), Unit: "messages", RatioOf: "target: 0", Settings: sent},
		{Bench: "density", Row: row, Metric: "wakes per second, every sleeping agent messaged at once (answered, late ones too, over the time to the last answer)",
			Value: wakesPerSecond, Unit: "wakes/s", Settings: fmt.Sprintf("%d agents woken, the last answered after %.0f s", m.burst, m.burstTook)},
		{Bench: "density", Row: row, Metric: "memory held (available memory before the platform, against after the fleet settled)", Value: m.held, Unit: "MiB",
			Baseline: "the same agents all awake (their count x an awake agent's RSS)", BaselineValue: allAwake, Ratio: m.held / allAwake, RatioOf: "held / all awake"},
		{Bench: "density", Row: row, Metric: "disk per sleeping agent (its checkpoint, thinned against the template)", Value: m.diskMiB, Unit: "MiB",
			Baseline: "the same checkpoints whole", BaselineValue: m.wholeMiB, Ratio: m.diskMiB / m.wholeMiB, RatioOf: "thinned / whole"},
		{Bench: "density", Row: row, Metric: "disk per sleeping agent, its checkpoint compressed (a long sleeper)", Value: m.packedMiB, Unit: "MiB",
			Baseline: "the same checkpoints whole", BaselineValue: m.wholeMiB, Ratio: m.packedMiB / m.wholeMiB, RatioOf: "thinned and compressed / whole; target: at most 64 MiB"},
	}
}
