package platform

import (
	"strings"
	"testing"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
)

// TestLeaderElectionOptions: the manager leads with the documented lease, releases it on a
// clean stop, and refuses settings under which a deposed leader could act beside the next.
func TestLeaderElectionOptions(t *testing.T) {
	var o ctrl.Options
	if err := (LeaderElectionOptions{}).Apply(&o, "sys"); err != nil || o.LeaderElection {
		t.Fatalf("disabled: leader election %v, err %v", o.LeaderElection, err)
	}
	if err := (LeaderElectionOptions{Enabled: true}).Apply(&o, "sys"); err != nil {
		t.Fatal(err)
	}
	switch {
	case !o.LeaderElection || o.LeaderElectionNamespace != "sys" || o.LeaderElectionID != "agentplane.io":
		t.Fatalf("lease %v %s/%s", o.LeaderElection, o.LeaderElectionNamespace, o.LeaderElectionID)
	case !o.LeaderElectionReleaseOnCancel:
		t.Fatal("a clean stop must release the lease")
	case *o.LeaseDuration != DefaultLeaseDuration || *o.RenewDeadline != DefaultRenewDeadline || *o.RetryPeriod != DefaultRetryPeriod:
		t.Fatalf("lease %s renew %s retry %s", *o.LeaseDuration, *o.RenewDeadline, *o.RetryPeriod)
	}
	for _, bad := range []LeaderElectionOptions{
		{Enabled: true, LeaseDuration: 2 * time.Second, RenewDeadline: 3 * time.Second},
		{Enabled: true, RenewDeadline: time.Second, RetryPeriod: time.Second},
	} {
		if err := bad.Apply(&ctrl.Options{}, "sys"); err == nil || !strings.Contains(err.Error(), "renew deadline") {
			t.Errorf("%+v: got %v, want a refusal", bad, err)
		}
	}
}
