package kubeaccess

import (
	"fmt"
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
			got, keep := addUsage(tc.cur, tc.day, count{usage: u}, "", now)
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

// A day's cost adds up in the table's currency, and each model's share with it: the costliest
// first, at most MaxUsageModels entries, the rest under OtherModels.
func TestAddUsageCostAndModels(t *testing.T) {
	now := metav1.NewTime(time.Date(2026, 11, 26, 9, 0, 0, 0, time.UTC))
	first := count{usage: modelproxy.Usage{Requests: 3, InputTokens: 30, OutputTokens: 3, CostMicros: 500, Unpriced: 1},
		models: map[string]modelproxy.Usage{
			"cheap": {Requests: 1, InputTokens: 10, OutputTokens: 1, CostMicros: 100},
			"dear":  {Requests: 1, InputTokens: 10, OutputTokens: 1, CostMicros: 400},
			"free":  {Requests: 1, InputTokens: 10, OutputTokens: 1, Unpriced: 1},
		}}
	got, _ := addUsage(nil, "2026-11-26", first, "EUR", now)
	got, _ = addUsage(got, "2026-11-26", count{usage: modelproxy.Usage{Requests: 1, InputTokens: 5, CostMicros: 1000},
		models: map[string]modelproxy.Usage{"cheap": {Requests: 1, InputTokens: 5, CostMicros: 1000}}}, "EUR", now)
	if got.CostMicros != 1500 || got.Currency != "EUR" || got.UnpricedRequests != 1 || got.Requests != 4 {
		t.Fatalf("usage %+v", got)
	}
	want := []agentsv1.ModelTally{
		{Model: "cheap", Requests: 2, InputTokens: 15, OutputTokens: 1, CostMicros: 1100},
		{Model: "dear", Requests: 1, InputTokens: 10, OutputTokens: 1, CostMicros: 400},
		{Model: "free", Requests: 1, InputTokens: 10, OutputTokens: 1},
	}
	if fmt.Sprint(got.Models) != fmt.Sprint(want) {
		t.Fatalf("models %+v, want %+v", got.Models, want)
	}

	many := map[string]modelproxy.Usage{}
	for i := range agentsv1.MaxUsageModels + 4 {
		many[fmt.Sprintf("m%02d", i)] = modelproxy.Usage{Requests: 1, CostMicros: int64(100 - i)}
	}
	got, _ = addUsage(got, "2026-11-26", count{models: many}, "EUR", now)
	if len(got.Models) != agentsv1.MaxUsageModels {
		t.Fatalf("%d models kept, want %d", len(got.Models), agentsv1.MaxUsageModels)
	}
	last := got.Models[len(got.Models)-1]
	var requests int64
	for _, m := range got.Models {
		requests += m.Requests
	}
	if last.Model != agentsv1.OtherModels || requests != 4+agentsv1.MaxUsageModels+4 {
		t.Fatalf("the rest: %+v, %d requests in all", last, requests)
	}
	// Another batch adds to the rest without growing the list.
	got, _ = addUsage(got, "2026-11-26", count{models: map[string]modelproxy.Usage{"new": {Requests: 1}}}, "EUR", now)
	if len(got.Models) != agentsv1.MaxUsageModels || got.Models[len(got.Models)-1].Model != agentsv1.OtherModels {
		t.Fatalf("models after one more %+v", got.Models)
	}
}

// Under a price table every write names its currency, also one of free or unpriced calls
// only: the day's spend is then 0 in it, not unknown.
func TestAddUsageNamesTheCurrency(t *testing.T) {
	now := metav1.NewTime(time.Date(2026, 11, 26, 9, 0, 0, 0, time.UTC))
	free := count{usage: modelproxy.Usage{Requests: 1}}
	if got, _ := addUsage(nil, "2026-11-26", free, "USD", now); got.Currency != "USD" || got.CostMicros != 0 {
		t.Fatalf("under a table: %+v", got)
	}
	if got, _ := addUsage(nil, "2026-11-26", free, "", now); got.Currency != "" {
		t.Fatalf("without a table: %+v", got)
	}
}
