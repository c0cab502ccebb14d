package apiserver

import (
	"context"
	"time"

	"github.com/agentplane/agentplane/internal/adapters/logredact"
	"github.com/agentplane/agentplane/internal/ops"
)

// redactedLines is a follower's way out: lines go through a logredact.Follower (a value split
// across two lines is hidden) whose Redactor follows the secrets attached meanwhile; the lines
// it holds back go out at most logHold after they came (hold fires).
type redactedLines struct {
	live *ops.LiveRedactor
	fol  *logredact.Follower
	hold *time.Timer
	held bool // hold is armed
}

func newRedactedLines(live *ops.LiveRedactor) *redactedLines {
	hold := time.NewTimer(time.Hour)
	hold.Stop()
	return &redactedLines{live: live, fol: logredact.NewFollower(live.Last()), hold: hold}
}

// write takes the next lines and returns, redacted, those that may go out (all with flush).
func (l *redactedLines) write(ctx context.Context, lines []string, flush bool) []string {
	l.fol.SetRedactor(l.live.Current(ctx))
	out := l.fol.Write(lines...)
	if flush {
		out = append(out, l.fol.Flush()...)
	}
	switch {
	case l.fol.Pending() == 0 && l.held:
		l.hold.Stop()
		l.held = false
	case l.fol.Pending() > 0 && !l.held:
		l.hold.Reset(logHold)
		l.held = true
	}
	return out
}
