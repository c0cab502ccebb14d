// Command density holds a fleet of agents on this machine the way a platform holds one, most
// of them asleep, on the local runtime with the real OpenClaw engine, CRIU and gateway
// templates (the shipped defaults as root), and measures what the fleet costs and how fast a
// sleeping agent answers a channel message:
//
//	go run ./hack/bench/density -n 12
//
// It starts the envtest control plane, a fake model provider, fake Telegram bots (one per
// agent, behind one Bot API origin) and an embedded platform whose model proxy and channel
// relay point at them. Each agent is created through POST /v0/agents (born from its engine's
// template), given the provider key (kept in the model proxy), a model and a Telegram channel
// through the relay, and answers a first message; all but the first -awake are then suspended
// (checkpointed). -busy of the awake ones run a console exec every 2 s. For -rounds rounds,
// -every apart, -wakes sleeping agents (in turn) and every awake one get a message at once:
// each answer's time from the message is measured, asleep (the platform's relay sees the
// message, wakes the agent from its checkpoint, the engine answers through the fake provider)
// against awake (the baseline, in the same rounds); each woken agent is suspended again.
// A last burst messages every sleeping agent at once: wakes per second until all answered.
// Memory is the machine's available memory before the platform started against after the
// fleet settled, against what the same agents would hold all awake (their awake RSS);
// disk is each sleeping agent's checkpoint once suspended: its own files (thinned against the
// template), against the same checkpoint whole, and its own files once compressed: the rounds
// start when every sleeper's checkpoint is (the shipped CheckpointPackAfter), as a fleet's
// sleepers are mostly long sleepers. Every message is accounted for at the end: answered late
// (after answerBound), not answered lateBound after the burst (lost) or answered more than once
// (doubled); the bot calls and gateway logs of the agents concerned are kept (trace).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"time"

	"github.com/agentplane/agentplane/hack/bench/internal/benchkit"
	"github.com/agentplane/agentplane/hack/bench/internal/report"
	"github.com/agentplane/agentplane/internal/adapters/runtime/local"
	"github.com/agentplane/agentplane/internal/devtools/faketelegram"
	"github.com/agentplane/agentplane/internal/platform"
)

// options are the flags.
type options struct {
	n, awake, busy, rounds, wakes int
	every                         time.Duration
}

func main() {
	var o options
	flag.IntVar(&o.n, "n", 12, "agents held")
	flag.IntVar(&o.awake, "awake", 2, "agents kept awake (the awake baseline's answers)")
	flag.IntVar(&o.busy, "busy", 1, "awake agents kept busy (benchkit.KeepBusy: a console exec and a config read every 2 s)")
	flag.IntVar(&o.rounds, "rounds", 4, "rounds of messages")
	flag.IntVar(&o.wakes, "wakes", 3, "sleeping agents messaged each round")
	flag.DurationVar(&o.every, "every", time.Minute, "time between the rounds' starts")
	jsonOut := report.Flag()
	flag.Parse()
	benchkit.Main(*jsonOut, func(ctx context.Context) ([]report.Result, error) { return run(ctx, o) })
}

// agent is one agent of the fleet: its id, its bot, the messages it was sent.
type agent struct {
	id     string
	bot    *faketelegram.Server
	sentAt []time.Time // when each message was sent
}

// asked is how many messages agent a was sent.
func (a *agent) asked() int { return len(a.sentAt) }

// user is the Telegram user who writes to every bot (each agent's allowlist).
const user = 424242

// answerBound bounds the wait for one answer: an agent that does not answer fails the run.
const answerBound = 3 * time.Minute

func run(ctx context.Context, o options) (_ []report.Result, err error) {
	if o.n < 2 || o.awake < 1 || o.awake >= o.n || o.busy > o.awake || o.wakes < 1 {
		return nil, errors.New("want -n >= 2, 1 <= -awake < -n, -busy <= -awake, -wakes >= 1")
	}
	tg := newBots()
	defer tg.close()
	b, err := benchkit.StartPlatform(ctx, "density", platform.ChannelRelayOptions{TelegramAPI: tg.srv.URL})
	if err != nil {
		return nil, err
	}
	defer func() { b.Stop(err) }()
	f := &fleet{c: b.Client, state: b.State}
	fmt.Printf("engine %s; %d agents, %d awake (%d busy), %d rounds of %d wakes every %s\n", b.Version, o.n, o.awake, o.busy, o.rounds, o.wakes, o.every)
	if err := f.build(ctx, tg, o.n, o.awake); err != nil {
		return nil, err
	}
	m, err := f.measure(ctx, o, b.AvailBefore)
	if err != nil {
		return nil, err
	}
	return results(o, b.Version, m), nil
}

// measure measures the fleet once built (all but -awake asleep): memory, disk plain and
// compressed, then the rounds and the burst beside the busy agents. availBefore is the
// available memory before the platform started.
func (f *fleet) measure(ctx context.Context, o options, availBefore float64) (measured, error) {
	awake, asleep := f.agents[:o.awake], f.agents[o.awake:]
	awakeRSS := make([]float64, 0, len(awake))
	for _, a := range awake {
		awakeRSS = append(awakeRSS, benchkit.GatewayRSS(f.state, a.id))
	}
	fmt.Printf("%d agents asleep, %d awake\n", len(asleep), len(awake))
	work, stopWork := context.WithCancel(ctx)
	defer stopWork()
	busyErrs := make(chan error, o.busy)
	for _, a := range awake[:o.busy] {
		go func() { busyErrs <- benchkit.KeepBusy(work, f.c, a.id) }()
	}
	disk, whole, err := f.checkpointMiB(asleep)
	if err != nil {
		return measured{}, err
	}
	availHeld := benchkit.MemAvailableMiB()
	// A fleet's sleepers are mostly long sleepers: the rounds start once every sleeping
	// agent's checkpoint is compressed (CheckpointPackAfter, shipped 10 minutes).
	fmt.Printf("waiting for the sleepers' checkpoints to be compressed (%s after each suspend)\n", local.DefaultCheckpointPackAfter)
	if err := f.waitPacked(ctx, asleep); err != nil {
		return measured{}, err
	}
	packed, _, err := f.checkpointMiB(asleep)
	if err != nil {
		return measured{}, err
	}
	m, err := f.rounds(ctx, o, awake, asleep)
	if err != nil {
		return measured{}, err
	}
	stopWork()
	for range o.busy {
		if err := <-busyErrs; err != nil {
			return measured{}, fmt.Errorf("the busy agent: %w", err)
		}
	}
	m.held, m.awakeRSS, m.diskMiB, m.wholeMiB, m.packedMiB = availBefore-availHeld, benchkit.Median(awakeRSS, func(x float64) float64 { return x }), disk, whole, packed
	return m, nil
}
