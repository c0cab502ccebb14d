package main

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/agentplane/agentplane/hack/bench/internal/benchkit"
	"github.com/agentplane/agentplane/internal/adapters/runtime/local"
)

// fleet is the agents on the platform at c; state is the platform's state dir.
type fleet struct {
	c      benchkit.Client
	state  string
	agents []*agent
}

// build makes n agents one after another, each answering its first message awake; all but the
// first awake are suspended once they answered, as a fleet mostly asleep grows.
func (f *fleet) build(ctx context.Context, tg *bots, n, awake int) error {
	secretID, err := f.c.ProviderKey()
	if err != nil {
		return err
	}
	for i := range n {
		start := time.Now()
		a, err := f.create(ctx, i, tg, secretID)
		if err != nil {
			return err
		}
		f.agents = append(f.agents, a)
		fmt.Printf("agent %3d %s running and answering after %s\n", i, a.id, time.Since(start).Round(time.Millisecond))
		if i >= awake {
			if err := f.suspend(a); err != nil {
				return err
			}
		}
	}
	return nil
}

// create makes agent i: created, running, given the provider key, the model and its bot's
// channel (through the relay), and answering a first message.
func (f *fleet) create(ctx context.Context, i int, tg *bots, secretID string) (*agent, error) {
	id, err := f.c.ModelAgent(ctx, fmt.Sprintf("density %d", i), secretID, answerBound)
	if err != nil {
		return nil, err
	}
	a := &agent{id: id, bot: tg.add(i)}
	if _, err := f.c.Expect("POST", "/v0/agents/"+id+"/channels/telegram", map[string]any{"botToken": a.bot.Token, "dmPolicy": "allowlist",
		"allowFrom": []string{fmt.Sprint(user)}}, 201); err != nil {
		return nil, err
	}
	if _, err := f.ask(ctx, a); err != nil {
		return nil, fmt.Errorf("agent %s's first answer: %w", id, err)
	}
	return a, nil
}

// errNoAnswer is an ask whose answer did not come within answerBound (counted as lost unless
// it comes later: tally).
var errNoAnswer = errors.New("no answer")

// ask sends agent a a message from user and returns how long its answer took: until the bot
// has sent one answer more than before the message (an earlier message answered twice is
// counted by tally, not taken for this one's answer).
func (f *fleet) ask(ctx context.Context, a *agent) (time.Duration, error) {
	before := answers(a.bot, user)
	start := time.Now()
	a.sentAt = append(a.sentAt, start)
	a.bot.SendText(user, fmt.Sprintf("message %d", a.asked()))
	for answers(a.bot, user) <= before {
		if time.Since(start) > answerBound {
			return 0, fmt.Errorf("agent %s, message %d: %w after %s", a.id, a.asked(), errNoAnswer, answerBound)
		}
		if err := benchkit.Sleep(ctx, 20*time.Millisecond); err != nil {
			return 0, err
		}
	}
	return time.Since(start), nil
}

// tally counts, over the fleet, the messages never answered and the answers beyond one per
// message.
func (f *fleet) tally() (lost, doubled int) {
	for _, a := range f.agents {
		n := answers(a.bot, user)
		lost += max(0, a.asked()-n)
		doubled += max(0, n-a.asked())
	}
	return lost, doubled
}

// suspend puts agent a to sleep (its gateway checkpointed).
func (f *fleet) suspend(a *agent) error {
	_, err := f.c.Expect("POST", "/v0/agents/"+a.id+"/suspend", nil, 200)
	return err
}

// checkpointMiB is the median of the sleeping agents' checkpoints' own disk (thinned against
// the engine's template: local.CheckpointSize) and of the same checkpoints whole.
func (f *fleet) checkpointMiB(asleep []*agent) (own, whole float64, err error) {
	var owns, wholes []float64
	for _, a := range asleep {
		dirs, _ := filepath.Glob(filepath.Join(f.state, "agents", "*", a.id, "checkpoint"))
		if len(dirs) != 1 {
			return 0, 0, fmt.Errorf("agent %s: checkpoint dirs %v under %s", a.id, dirs, f.state)
		}
		o, w, err := local.CheckpointSize(dirs[0])
		if err != nil {
			return 0, 0, err
		}
		owns, wholes = append(owns, float64(o)/(1<<20)), append(wholes, float64(w)/(1<<20))
	}
	mib := func(x float64) float64 { return x }
	return benchkit.Median(owns, mib), benchkit.Median(wholes, mib), nil
}

// waitPacked waits until each agent's checkpoint has a compressed pages file.
func (f *fleet) waitPacked(ctx context.Context, asleep []*agent) error {
	deadline := time.Now().Add(local.DefaultCheckpointPackAfter + 10*time.Minute)
	for _, a := range asleep {
		for {
			m, _ := filepath.Glob(filepath.Join(f.state, "agents", "*", a.id, "checkpoint", "pages-*.img.zst"))
			if len(m) > 0 {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("agent %s's checkpoint is not compressed %s after the fleet was built", a.id, local.DefaultCheckpointPackAfter+10*time.Minute)
			}
			if err := benchkit.Sleep(ctx, time.Second); err != nil {
				return err
			}
		}
	}
	return nil
}

// measured is what the rounds and the burst measured, in seconds, and the fleet's cost.
type measured struct {
	fromAsleep, fromAwake []float64
	burst                 int
	burstTook             float64
	held, awakeRSS        float64 // MiB
	diskMiB, wholeMiB     float64
	packedMiB             float64 // once every sleeper's checkpoint is compressed
	lost, doubled, sent   int
	late                  int // answered, but not within answerBound
}

// rounds runs the rounds and the burst: each round messages the next -wakes sleeping agents
// and every awake one at once, then suspends the woken ones again.
func (f *fleet) rounds(ctx context.Context, o options, awake, asleep []*agent) (measured, error) {
	var m measured
	next := 0
	for r := range o.rounds {
		start := time.Now()
		var woken []*agent
		for range min(o.wakes, len(asleep)) {
			woken = append(woken, asleep[next%len(asleep)])
			next++
		}
		fromAsleep, fromAwake, unanswered, err := f.askAll(ctx, woken, awake)
		if err != nil {
			return m, err
		}
		m.late += unanswered
		m.fromAsleep, m.fromAwake = append(m.fromAsleep, fromAsleep...), append(m.fromAwake, fromAwake...)
		fmt.Printf("round %d: asleep answered in %v, awake in %v, %d unanswered after %s\n", r+1, seconds(fromAsleep), seconds(fromAwake), unanswered, answerBound)
		for _, a := range woken {
			if err := f.suspend(a); err != nil {
				return m, err
			}
		}
		if r < o.rounds-1 {
			if err := benchkit.Sleep(ctx, time.Until(start.Add(o.every))); err != nil {
				return m, err
			}
		}
	}
	start := time.Now()
	fromAsleep, _, unanswered, err := f.askAll(ctx, asleep, nil)
	if err != nil {
		return m, err
	}
	fmt.Printf("burst: %d of %d sleeping agents answered within %s (%s)\n",
		len(fromAsleep), len(asleep), answerBound, time.Since(start).Round(time.Second))
	m.fromAsleep = append(m.fromAsleep, fromAsleep...)
	m.late += unanswered
	if m.late > 0 {
		fmt.Printf("waiting up to %s for the %d messages not answered within %s\n", lateBound, m.late, answerBound)
	}
	if err := f.waitLate(ctx); err != nil {
		return m, err
	}
	m.lost, m.doubled = f.tally()
	m.late -= m.lost
	m.burst, m.burstTook = burstAnswers(asleep, start)
	for _, a := range f.agents {
		m.sent += a.asked()
	}
	dir, err := f.trace()
	if err != nil {
		return m, err
	}
	if dir != "" {
		fmt.Printf("the bot calls and gateway logs of the agents not answered once per message: %s\n", dir)
	}
	return m, nil
}

// burstAnswers is how many of the agents messaged at start (the burst) answered that message,
// late ones included, and when the last of them did, in seconds from start: each agent's
// answer to its last message is its last answer (the bot's record).
func burstAnswers(burst []*agent, start time.Time) (answered int, took float64) {
	for _, a := range burst {
		if at := lastAnswer(a.bot, user); at.After(start) && answers(a.bot, user) >= a.asked() {
			answered++
			took = max(took, at.Sub(start).Seconds())
		}
	}
	return answered, took
}

// askAll messages every agent of both lists at once and returns the answers' times and how
// many did not come within answerBound.
func (f *fleet) askAll(ctx context.Context, asleep, awake []*agent) (fromAsleep, fromAwake []float64, unanswered int, err error) {
	var mu sync.Mutex
	var wg sync.WaitGroup
	var errs []error
	for i, a := range append(slices.Clone(asleep), awake...) {
		wg.Go(func() {
			took, e := f.ask(ctx, a)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case errors.Is(e, errNoAnswer):
				unanswered++
			case e != nil:
				errs = append(errs, e)
			case i < len(asleep):
				fromAsleep = append(fromAsleep, took.Seconds())
			default:
				fromAwake = append(fromAwake, took.Seconds())
			}
		})
	}
	wg.Wait()
	if len(errs) > 0 {
		return nil, nil, 0, errs[0]
	}
	return fromAsleep, fromAwake, unanswered, nil
}

// seconds rounds a list of seconds to tenths, for printing.
func seconds(s []float64) []float64 {
	out := make([]float64, len(s))
	for i, v := range s {
		out[i] = float64(int(v*10+0.5)) / 10
	}
	return out
}
