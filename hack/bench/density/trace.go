package main

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/agentplane/agentplane/hack/bench/internal/benchkit"
)

// lateBound is how long the run waits, after the burst, for the answers that did not come
// within answerBound: those that come are late, the rest lost.
const lateBound = 10 * time.Minute

// waitLate waits until every message of the fleet has an answer, or lateBound passed.
func (f *fleet) waitLate(ctx context.Context) error {
	deadline := time.Now().Add(lateBound)
	for time.Now().Before(deadline) {
		if lost, _ := f.tally(); lost == 0 {
			return nil
		}
		if err := benchkit.Sleep(ctx, time.Second); err != nil {
			return err
		}
	}
	return nil
}

// trace writes, for each agent whose answers are not one per message, what its bot saw (the
// messages sent to it and every Bot API call, in order, with their times) and its gateway's
// log into a new directory under the temporary dir, and returns that directory ("" when every
// message had one answer).
func (f *fleet) trace() (string, error) {
	var odd []*agent
	for _, a := range f.agents {
		if answers(a.bot, user) != a.asked() {
			odd = append(odd, a)
		}
	}
	if len(odd) == 0 {
		return "", nil
	}
	dir, err := os.MkdirTemp("", "agentplane-density-trace-")
	if err != nil {
		return "", err
	}
	for _, a := range odd {
		var b strings.Builder
		fmt.Fprintf(&b, "agent %s: %d messages, %d answers\n", a.id, a.asked(), answers(a.bot, user))
		for i, at := range a.sentAt {
			fmt.Fprintf(&b, "%s message %d sent\n", at.Format("15:04:05.000"), i+1)
		}
		for _, c := range a.bot.Calls() {
			params := maps.Clone(c.Params) // the fake's record stays as it is
			delete(params, "reply_markup")
			fmt.Fprintf(&b, "%s %s %v\n", c.At.Format("15:04:05.000"), c.Method, params)
		}
		if err := os.WriteFile(filepath.Join(dir, a.id+"-bot.txt"), []byte(b.String()), 0o644); err != nil {
			return "", err
		}
		logs, _ := filepath.Glob(filepath.Join(f.state, "agents", "*", a.id, "gateway.log"))
		for _, l := range logs {
			if data, err := os.ReadFile(l); err == nil {
				if err := os.WriteFile(filepath.Join(dir, a.id+"-gateway.log"), data, 0o644); err != nil {
					return "", err
				}
			}
		}
	}
	return dir, nil
}
