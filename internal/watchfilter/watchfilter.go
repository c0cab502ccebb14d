// Package watchfilter holds the update filters of the controllers' watches, typed: a filter is
// a function of the old and the new object of one kind, and the few comparisons the
// controllers share (a spec change, a deletion start, a condition change) are named here once.
package watchfilter

import (
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
)

// Updates passes creations, deletions and generic events, and the updates of a T for which
// changed(old, new) holds. An update of another kind passes (the filter cannot judge it).
func Updates[T client.Object](changed func(old, new T) bool) predicate.Predicate {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool { return update(e, changed, true) }}
}

// OnlyUpdates passes only the updates of a T for which changed(old, new) holds: for a second
// watch of a kind whose creations and deletions another watch already sees.
func OnlyUpdates[T client.Object](changed func(old, new T) bool) predicate.Predicate {
	return predicate.Funcs{
		CreateFunc:  func(event.CreateEvent) bool { return false },
		DeleteFunc:  func(event.DeleteEvent) bool { return false },
		GenericFunc: func(event.GenericEvent) bool { return false },
		UpdateFunc:  func(e event.UpdateEvent) bool { return update(e, changed, false) },
	}
}

func update[T client.Object](e event.UpdateEvent, changed func(old, new T) bool, otherKinds bool) bool {
	o, ok1 := e.ObjectOld.(T)
	n, ok2 := e.ObjectNew.(T)
	if !ok1 || !ok2 {
		return otherKinds
	}
	return changed(o, n)
}

// SpecOrDeletion tells whether the spec changed (the generation) or the deletion started.
func SpecOrDeletion(o, n client.Object) bool {
	return o.GetGeneration() != n.GetGeneration() || DeletionStarted(o, n)
}

// DeletionStarted tells whether n is being deleted and o was not (or the reverse, which the
// API server never does but a cache resync may show).
func DeletionStarted(o, n client.Object) bool {
	return (o.GetDeletionTimestamp() == nil) != (n.GetDeletionTimestamp() == nil)
}

// ConditionChanged tells whether the condition of type t differs between two lists (added,
// removed, or any of its fields).
func ConditionChanged(o, n []metav1.Condition, t string) bool {
	return !equality.Semantic.DeepEqual(meta.FindStatusCondition(o, t), meta.FindStatusCondition(n, t))
}

// ConditionFlipped tells whether the condition of type t turned True or stopped being True.
func ConditionFlipped(o, n []metav1.Condition, t string) bool {
	return meta.IsStatusConditionTrue(o, t) != meta.IsStatusConditionTrue(n, t)
}
