package platform

import (
	"fmt"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
)

// The leader election's defaults. A replica that crashes holds the lease until it expires:
// the standby, trying every RetryPeriod (jittered up to 2.2 times), leads about LeaseDuration
// after the crash, under 5 s. A replica that stops cleanly releases the lease as it goes
// (ReleaseOnCancel): the standby leads at its next try, under 1 s. RenewDeadline is how long
// a leader that cannot renew keeps acting before it steps down (and exits): shorter than
// LeaseDuration, so a deposed leader stops before another takes over, and long enough to
// ride out an API server that answers slowly for a few seconds. The price is the Lease's
// traffic: the leader writes it and each standby reads it about four times a second.
// controller-runtime's own defaults (15 s, 10 s, 2 s) hand over 15 s or more after a crash
// and, without the release, after a clean stop too. TestLeaderFailover (test/stress) shows
// both handovers; BenchmarkFailover times them against controller-runtime alone holding this
// same lease (what the platform adds to the handover the lease allows).
const (
	DefaultLeaseDuration = 4 * time.Second
	DefaultRenewDeadline = 3 * time.Second
	DefaultRetryPeriod   = 250 * time.Millisecond
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

// Apply sets the manager options o to the leader election l (in namespace): the platform's
// manager and the failover benchmark's baseline (controller-runtime alone) hold the same lease.
func (l LeaderElectionOptions) Apply(o *ctrl.Options, namespace string) error {
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
