package modelaccess

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/adapters/modelproxy"
)

func TestAddUsage(t *testing.T) {
	now := metav1.NewTime(time.Date(2026, 11, 26, 9, 0, 0, 0, time.UTC))
	u := modelproxy.Usage{Requests: 2, InputTokens: 30, OutputTokens: 10}
	for _, tc := range []struct {
		name string
		cur  *agentsv1.ModelUsage
		day  string
		want *agentsv1.ModelUsage // nil: dropped
	}{
		{"first usage", nil, "2026-11-26", &agentsv1.ModelUsage{Day: "2026-11-26", Requests: 2, InputTokens: 30, OutputTokens: 10}},
		{"same day adds", &agentsv1.ModelUsage{Day: "2026-11-26", Requests: 1, InputTokens: 5, OutputTokens: 5}, "2026-11-26",
			&agentsv1.ModelUsage{Day: "2026-11-26", Requests: 3, InputTokens: 35, OutputTokens: 15}},
		{"a new day starts from zero", &agentsv1.ModelUsage{Day: "2026-11-25", Requests: 9, InputTokens: 900}, "2026-11-26",
			&agentsv1.ModelUsage{Day: "2026-11-26", Requests: 2, InputTokens: 30, OutputTokens: 10}},
		{"a late delta of a past day is dropped", &agentsv1.ModelUsage{Day: "2026-11-26", Requests: 1}, "2026-11-25", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, keep := addUsage(tc.cur, tc.day, u, now)
			if tc.want == nil {
				if keep {
					t.Fatalf("kept %+v", got)
				}
				return
			}
			if !keep || got.Day != tc.want.Day || got.Requests != tc.want.Requests || got.InputTokens != tc.want.InputTokens ||
				got.OutputTokens != tc.want.OutputTokens || got.UpdatedAt == nil || !got.UpdatedAt.Equal(&now) {
				t.Fatalf("got %+v (keep %v), want %+v", got, keep, tc.want)
			}
			if tc.cur != nil && tc.cur.Day == tc.day && tc.cur.Requests == got.Requests {
				t.Fatal("the stored usage was changed in place")
			}
		})
	}
}
