package ops

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/adapters/modelproxy"
)

// pricedMeter is a model proxy whose price table is in currency ("": none).
type pricedMeter struct{ currency string }

func (pricedMeter) Meter(string) modelproxy.Reading { return modelproxy.Reading{} }
func (pricedMeter) Settled(context.Context, string) (modelproxy.Reading, error) {
	return modelproxy.Reading{}, nil
}
func (m pricedMeter) Currency() string { return m.currency }

// A spend budget needs a price table: without one every model call under it would be refused,
// so the budget is refused instead; token budgets need none.
func TestSpendBudgetNeedsAPriceTable(t *testing.T) {
	ws := &agentsv1.Workspace{ObjectMeta: metav1.ObjectMeta{Name: "ws"}}
	for _, tc := range []struct {
		name  string
		meter ModelMeter
		ok    bool
	}{
		{"no model proxy", nil, false},
		{"a proxy without a price table", pricedMeter{}, false},
		{"a proxy with one", pricedMeter{"USD"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, _ := fakeOps(Deps{ModelMeter: tc.meter}, ws.DeepCopy())
			_, err := o.SetWorkspaceBudget(context.Background(), "ws", agentsv1.ModelBudget{CostMicrosPerDay: 1})
			if tc.ok != (err == nil) {
				t.Fatalf("spend budget: %v", err)
			}
			if !tc.ok && Classify(err).Message != MsgNoPriceTable {
				t.Fatalf("refused with %q", Classify(err).Message)
			}
			if _, err := o.SetWorkspaceBudget(context.Background(), "ws", agentsv1.ModelBudget{TokensPerDay: 1}); err != nil {
				t.Fatalf("a token budget: %v", err)
			}
		})
	}
}
