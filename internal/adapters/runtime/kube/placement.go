package kube

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// ParseToleration reads a toleration in the form kubectl taint writes a taint:
// key=value:Effect tolerates that taint (operator Equal), key:Effect any value of key
// (Exists); without :Effect it tolerates every effect. Effect is NoSchedule,
// PreferNoSchedule or NoExecute.
func ParseToleration(s string) (corev1.Toleration, error) {
	t := corev1.Toleration{Operator: corev1.TolerationOpExists}
	kv, effect, hasEffect := strings.Cut(s, ":")
	if hasEffect {
		switch e := corev1.TaintEffect(effect); e {
		case corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute:
			t.Effect = e
		default:
			return t, fmt.Errorf("toleration %q: effect %q is not NoSchedule, PreferNoSchedule or NoExecute", s, effect)
		}
	}
	key, value, hasValue := strings.Cut(kv, "=")
	if errs := validation.IsQualifiedName(key); len(errs) > 0 {
		return t, fmt.Errorf("toleration %q: key: %s", s, strings.Join(errs, "; "))
	}
	t.Key = key
	if hasValue {
		if errs := validation.IsValidLabelValue(value); len(errs) > 0 {
			return t, fmt.Errorf("toleration %q: value: %s", s, strings.Join(errs, "; "))
		}
		t.Operator, t.Value = corev1.TolerationOpEqual, value
	}
	return t, nil
}
