package local

import (
	"context"
	"errors"
	"net"
	"time"

	"github.com/agentplane/agentplane/internal/adapters/engine"
)

// rebirthOldEvery is how often a copy's gateway is asked with the template's token whether
// the template's instance still serves it (rebirth).
const rebirthOldEvery = time.Second

var errNotReborn = errors.New("the gateway still serves as its template")

// rebirth follows a thawed copy of a template (restoreCopy) through its restart on its own
// config, one check at a time (waitReborn's loop, a warm copy's supervisor): the copy is
// reborn once it is ready and accepts its own token.
//
// The template's token tells which instance answers: the template's accepts it at once, the
// reborn one refuses it. The copy's own token is tried only once the template's instance is
// gone: OpenClaw answers a refused token late (250 ms, doubling with each further refusal up
// to 5 s: waitBound) and counts the waiting request as active work, and a restart on SIGUSR2
// waits until no work is active (up to 5 minutes). Tried on the template's instance, one
// refusal after another kept a request waiting at all times and the restart did not begin
// (CI, 2026-12-02: a copy's health check timed out on the loaded machine, was taken for the
// restart, the copy's token was tried every 50 ms, and the copy did not restart within the
// start timeout). A health check that times out is a busy gateway, not a restart.
type rebirth struct {
	oldToken string    // the template's gateway token
	gone     bool      // the template's instance does not serve any more
	wasGone  bool      // gone was seen once
	lastOld  time.Time // the last try of oldToken
}

// check looks once at the copy's gateway at url: nil once it is reborn and accepts token.
func (b *rebirth) check(ctx context.Context, r *Runtime, url, token string) error {
	tc, checks := r.opts.Engine.(engine.TokenChecker)
	if !b.gone {
		err := r.opts.Engine.Healthy(ctx, url)
		switch {
		case err != nil && isTimeout(err):
			return err // busy
		case err != nil:
			b.gone = true // its server closed for the restart
		case !checks, time.Since(b.lastOld) < rebirthOldEvery:
			return errNotReborn
		default:
			b.lastOld = time.Now()
			ok, err := tc.TokenAccepted(ctx, url, b.oldToken)
			switch {
			case err != nil && isTimeout(err):
				return err
			case err == nil && ok:
				return errNotReborn
			}
			b.gone = true // refused: the reborn instance answers (or, an error: its work admission closed for the restart)
		}
		b.wasGone = true
	}
	if err := r.ready(ctx, url); err != nil {
		return err
	}
	if !checks {
		return nil
	}
	ok, err := tc.TokenAccepted(ctx, url, token)
	switch {
	case err == nil && ok:
		return nil
	case err == nil:
		b.gone = false // the template's instance answered after all: look again with its token
		return errTokenRefused
	}
	return err
}

// isTimeout reports whether err is a request that ran out of time.
func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout()
}
