package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/agentplane/agentplane/hack/bench/internal/benchkit"
)

// answerBound bounds the wait for one answer; a message not answered by then is counted
// unanswered and the cycles go on (tally decides late or lost).
const answerBound = 3 * time.Minute

// lateBound is how long the run waits, after the cycles, for the answers that did not come
// within answerBound: those that come are late, the rest lost.
const lateBound = 5 * time.Minute

// errNoAnswer is an ask whose answer did not come within answerBound.
var errNoAnswer = errors.New("no answer")

// cycler is one kind's agent and what its cycles measured (seconds).
type cycler struct {
	k                      kind
	c                      benchkit.Client
	id                     string
	sleep                  time.Duration // between the suspend and the message asleep
	sent                   int
	awake, asleep, suspend []float64
	unanswered             int
}

// ask sends the agent a message and returns how long its answer took: until the bot has sent
// one answer more than before the message.
func (r *cycler) ask(ctx context.Context) (time.Duration, error) {
	before := r.k.answers()
	r.sent++
	start := time.Now()
	r.k.send(fmt.Sprintf("message %d", r.sent))
	for r.k.answers() <= before {
		if time.Since(start) > answerBound {
			return 0, fmt.Errorf("%s agent %s, message %d: %w after %s", r.k.name, r.id, r.sent, errNoAnswer, answerBound)
		}
		if err := benchkit.Sleep(ctx, 10*time.Millisecond); err != nil {
			return 0, err
		}
	}
	return time.Since(start), nil
}

// record asks and appends the answer's time to into, or counts the message unanswered.
func (r *cycler) record(ctx context.Context, into *[]float64) error {
	took, err := r.ask(ctx)
	switch {
	case errors.Is(err, errNoAnswer):
		r.unanswered++
		fmt.Println(err)
		return nil
	case err != nil:
		return err
	}
	*into = append(*into, took.Seconds())
	return nil
}

// cycles runs n sleep and wake cycles: a message to the agent awake (the baseline), its
// suspend (checkpointed), r.sleep later a message to it asleep (the platform's relay wakes it).
func (r *cycler) cycles(ctx context.Context, n int) error {
	for i := range n {
		if err := r.record(ctx, &r.awake); err != nil {
			return err
		}
		start := time.Now()
		if _, err := r.c.Expect("POST", "/v0/agents/"+r.id+"/suspend", nil, 200); err != nil {
			return err
		}
		r.suspend = append(r.suspend, time.Since(start).Seconds())
		if err := benchkit.Sleep(ctx, r.sleep); err != nil {
			return err
		}
		if err := r.record(ctx, &r.asleep); err != nil {
			return err
		}
		if (i+1)%10 == 0 {
			fmt.Printf("%s: %d cycles, asleep answered p50 %.2f s, awake p50 %.2f s, %d unanswered\n",
				r.k.name, i+1, benchkit.Percentile(r.asleep, 50), benchkit.Percentile(r.awake, 50), r.unanswered)
		}
	}
	return nil
}

// tally waits up to lateBound for every message's answer and returns the messages answered
// late (after answerBound), never answered (lost) and answered more than once (doubled).
func (r *cycler) tally(ctx context.Context) (late, lost, doubled int, err error) {
	deadline := time.Now().Add(lateBound)
	for r.k.answers() < r.sent && time.Now().Before(deadline) {
		if err := benchkit.Sleep(ctx, time.Second); err != nil {
			return 0, 0, 0, err
		}
	}
	n := r.k.answers()
	lost, doubled = max(0, r.sent-n), max(0, n-r.sent)
	return r.unanswered - lost, lost, doubled, nil
}
