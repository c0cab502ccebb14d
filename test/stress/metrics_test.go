package stress

import (
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// metricByLabel reads the manager's metric name (a counter or a gauge) from controller-runtime's
// registry, summed by the value of its label (controller_runtime_reconcile_total by
// "controller": every result of a controller in one figure).
func metricByLabel(t *testing.T, name, label string) map[string]float64 {
	t.Helper()
	families, err := metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	by := map[string]float64{}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == label {
					by[l.GetValue()] += m.GetCounter().GetValue() + m.GetGauge().GetValue()
				}
			}
		}
	}
	return by
}
