// Command wakes measures the sleep and wake cycles of an agent on each channel kind, on the
// local runtime with the real OpenClaw engine, CRIU and gateway templates (the shipped
// defaults as root):
//
//	go run ./hack/bench/wakes -cycles 100
//
// It starts the envtest control plane, a fake model provider, a fake Telegram Bot API, a fake
// Slack workspace and a fake Discord on loopback, and an embedded platform whose model proxy
// and channel relay (Telegram, Slack and Discord) point at them. One agent per kind is created
// through POST /v0/agents (born from its engine's template), given the provider key (kept in
// the model proxy), the model and its channel through the relay (the Slack and Discord plugins
// installed from the registry), and answers a first message. Then each agent runs -cycles
// cycles, the kinds side by side: a message awake (the baseline), a suspend (its gateway
// checkpointed), -asleep later a message asleep (the relay holds the channel, wakes the agent
// from its checkpoint and delivers; the engine answers through the fake provider). Each
// answer's time from its message is measured, asleep against awake; at the end every message
// is accounted for: answered late (after answerBound), lost (not answered lateBound after the
// cycles) or doubled (answered more than once). An answer is a bot message that is the model's
// reply itself (the engine's heartbeat alerts quote it and are not counted).
package main

import (
	"context"
	"flag"
	"fmt"
	"sync"
	"time"

	"github.com/agentplane/agentplane/hack/bench/internal/benchkit"
	"github.com/agentplane/agentplane/hack/bench/internal/report"
	"github.com/agentplane/agentplane/internal/platform"
)

func main() {
	cycles := flag.Int("cycles", 100, "sleep and wake cycles per channel kind")
	names := flag.String("kinds", "telegram,slack,discord", "channel kinds, one agent each")
	asleep := flag.Duration("asleep", 0, "how long each agent sleeps before its message asleep (its gateway's timers come due meanwhile, as in a real sleep)")
	jsonOut := report.Flag()
	flag.Parse()
	benchkit.Main(*jsonOut, func(ctx context.Context) ([]report.Result, error) {
		return run(ctx, *cycles, *names, *asleep)
	})
}

func run(ctx context.Context, cycles int, names string, asleep time.Duration) (_ []report.Result, err error) {
	if cycles < 1 {
		return nil, fmt.Errorf("want -cycles >= 1")
	}
	fk := newFakes()
	defer fk.close()
	kinds, err := fk.kinds(names)
	if err != nil {
		return nil, err
	}
	b, err := benchkit.StartPlatform(ctx, "wakes", platform.ChannelRelayOptions{TelegramAPI: fk.tg.URL,
		SlackAPI: fk.sl.APIURL(), Slack: true, Discord: true, DiscordAPI: fk.dc.APIURL(), DiscordCDN: fk.dc.CDNURL()})
	if err != nil {
		return nil, err
	}
	defer func() { b.Stop(err) }()
	fmt.Printf("engine %s; %d sleep and wake cycles for each of %s, side by side\n", b.Version, cycles, names)
	cs, err := connect(ctx, b.Client, kinds, asleep)
	if err != nil {
		return nil, err
	}
	return measure(ctx, cs, cycles, b.Version)
}

// connect makes one agent per kind, each answering a first message on its channel.
func connect(ctx context.Context, c benchkit.Client, kinds []kind, asleep time.Duration) ([]*cycler, error) {
	secretID, err := c.ProviderKey()
	if err != nil {
		return nil, err
	}
	var out []*cycler
	for _, k := range kinds {
		start := time.Now()
		id, err := c.ModelAgent(ctx, "wakes "+k.name, secretID, answerBound)
		if err != nil {
			return nil, err
		}
		if err := k.connect(ctx, c, id); err != nil {
			return nil, err
		}
		r := &cycler{k: k, c: c, id: id, sleep: asleep}
		if _, err := r.ask(ctx); err != nil {
			return nil, fmt.Errorf("the %s agent's first answer: %w", k.name, err)
		}
		fmt.Printf("%s agent %s connected and answering after %s\n", k.name, id, time.Since(start).Round(time.Millisecond))
		out = append(out, r)
	}
	return out, nil
}

// measure runs every kind's cycles side by side, then accounts for every message.
func measure(ctx context.Context, cs []*cycler, cycles int, version string) ([]report.Result, error) {
	errs := make([]error, len(cs))
	var wg sync.WaitGroup
	for i, r := range cs {
		wg.Go(func() { errs[i] = r.cycles(ctx, cycles) })
	}
	wg.Wait()
	var rs []report.Result
	for i, r := range cs {
		if errs[i] != nil {
			return nil, fmt.Errorf("%s: %w", r.k.name, errs[i])
		}
		late, lost, doubled, err := r.tally(ctx)
		if err != nil {
			return nil, err
		}
		rs = append(rs, results(r, cycles, version, late, lost, doubled)...)
	}
	return rs, nil
}
