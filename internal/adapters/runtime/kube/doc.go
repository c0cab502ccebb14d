// Package kube is the Runtime for real clusters: every agent is a StatefulSet with one replica
// whose PersistentVolumeClaim holds the engine home (/home/node) and a headless Service on the
// gateway port; an init container seeds the first engine config from its own environment.
// Engine commands and file operations run in the pod through the pods/exec subresource.
//
// Objects are written with server-side apply (field manager "agentplane"), so an Ensure that
// changes nothing writes nothing, and fields other managers own are left alone.
package kube

// RBAC the manager needs for this runtime. The Agent controller adds its own markers (Secrets,
// Agents: a warm pool member's token Secret, the adoption annotation). Pods and home volumes
// are patched when an agent adopts a warm pool member (its labels).
//
// +kubebuilder:rbac:groups=apps,resources=statefulsets,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",resources=services,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",resources=persistentvolumeclaims,verbs=get;list;watch;patch;delete
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch;patch;delete
// +kubebuilder:rbac:groups="",resources=pods/exec,verbs=create;get
// +kubebuilder:rbac:groups="",resources=pods/log,verbs=get
// +kubebuilder:rbac:groups="",resources=nodes,verbs=get;list;watch
// +kubebuilder:rbac:groups=networking.k8s.io,resources=networkpolicies,verbs=get;list;watch;create;update;patch;delete
