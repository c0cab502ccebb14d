package platform

import (
	"fmt"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
)

// The leader election's defaults. A replica that crashes holds the lease until it expires:
// the standby, retrying every RetryPeriod, leads within LeaseDuration + RetryPeriod (4.5 s)
// of the crash. A replica that stops cleanly releases the lease as it goes
// (ReleaseOnCancel): the standby leads within one RetryPeriod (0.5 s). RenewDeadline is how
// long a leader that cannot renew keeps acting before it steps down (and exits): it must be
// shorter than LeaseDuration, so a deposed leader stops before another takes over, and long
// enough to ride out an API server that answers slowly for a few seconds. controller-runtime's
// own defaults (15 s, 10 s, 2 s) hand over 17 s after a crash.
const (
	DefaultLeaseDuration = 4 * time.Second
	DefaultRenewDeadline = 3 * time.Second
	DefaultRetryPeriod   = 500 * time.Millisecond
)

// LeaderElectionOptions are the lease the controllers' leader holds.
type LeaderElectionOptions struct {
	// Enabled makes controllers run on one replica at a time (the REST facade runs on all).
	Enabled bool
	// LeaseDuration, RenewDeadline and RetryPeriod tune the lease (zero: the defaults above).
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
}

// withDefaults fills the zero durations and checks their order.
func (l LeaderElectionOptions) withDefaults() (LeaderElectionOptions, error) {
	if l.LeaseDuration <= 0 {
		l.LeaseDuration = DefaultLeaseDuration
	}
	if l.RenewDeadline <= 0 {
		l.RenewDeadline = DefaultRenewDeadline
	}
	if l.RetryPeriod <= 0 {
		l.RetryPeriod = DefaultRetryPeriod
	}
	if l.RenewDeadline >= l.LeaseDuration || l.RetryPeriod >= l.RenewDeadline {
		return l, fmt.Errorf("leader election: want retry period (%s) < renew deadline (%s) < lease duration (%s)",
			l.RetryPeriod, l.RenewDeadline, l.LeaseDuration)
	}
	return l, nil
}

// apply sets the manager's leader election from l.
func (l LeaderElectionOptions) apply(o *ctrl.Options, namespace string) error {
	if !l.Enabled {
		return nil
	}
	l, err := l.withDefaults()
	if err != nil {
		return err
	}
	o.LeaderElection = true
	o.LeaderElectionID = "agentplane.io"
	o.LeaderElectionNamespace = namespace
	o.LeaseDuration, o.RenewDeadline, o.RetryPeriod = &l.LeaseDuration, &l.RenewDeadline, &l.RetryPeriod
	// The process exits when the manager stops (cmd/agentplane), so releasing the lease on
	// the way out cannot leave two leaders.
	o.LeaderElectionReleaseOnCancel = true
	return nil
}
