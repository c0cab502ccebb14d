package kube

import (
	"crypto/rand"
	"maps"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/adapters/runtime"
)

// Labels and annotations of warm pool members (GatewayPool on the kube runtime).
const (
	// LabelPool names the pool of a member that no agent adopted yet.
	LabelPool = "agentplane.io/pool"
	// LabelPoolMember is a member's id: its StatefulSet's selector, kept once adopted.
	LabelPoolMember = "agentplane.io/pool-member"
	// LabelPoolVersion is the engine version a member runs.
	LabelPoolVersion = "agentplane.io/pool-version"
	// LabelReservedFor is the UID of the agent a member is reserved for (ReserveGateway); it
	// stays on the StatefulSet once the agent adopted it.
	LabelReservedFor = "agentplane.io/reserved-for"
	// AnnotationReservedAt is when a member was reserved (RFC 3339): unused reservations expire.
	AnnotationReservedAt = "agentplane.io/reserved-at"
	// memberPrefix starts every member's StatefulSet name.
	memberPrefix = "pool-"
)

// memberID is the id of the member StatefulSet name (`pool-<id>`).
func memberID(sts string) string { return strings.TrimPrefix(sts, memberPrefix) }

// memberSelector selects the pod of the member StatefulSet name (also once adopted).
func memberSelector(sts string) map[string]string {
	return map[string]string{LabelPoolMember: memberID(sts)}
}

// memberTokenSecret is the Secret with a member's gateway token. The member's pod reads its
// token from it for as long as the pod lives (an adopted pod too: the token is the agent's
// then), so it is owned by the StatefulSet.
func memberTokenSecret(sts string) string { return sts + "-token" }

// newMemberID is a random member id: 10 characters of [a-z0-9].
func newMemberID() string {
	const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
	b := make([]byte, 10)
	_, _ = rand.Read(b)
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	return string(b)
}

// memberLabels are the labels of a member of pool with id running version (no agent's).
func memberLabels(pool, id, version string, o Options) map[string]string {
	return map[string]string{
		agentsv1.LabelAppName:      o.Engine.Name(),
		agentsv1.LabelAppInstance:  memberPrefix + id,
		agentsv1.LabelAppManagedBy: agentsv1.ManagedBy,
		LabelPool:                  pool,
		LabelPoolMember:            id,
		LabelPoolVersion:           version,
	}
}

// poolOwner references the cluster-scoped GatewayPool from its namespaced members (not as
// their controller: the agent that adopts one becomes that).
func poolOwner(gp *agentsv1.GatewayPool) metav1.OwnerReference {
	return metav1.OwnerReference{
		APIVersion: agentsv1.GroupVersion.String(), Kind: "GatewayPool", Name: gp.Name, UID: gp.UID,
	}
}

// BuildMember is the StatefulSet of member id of pool gp in namespace ns: the StatefulSet an
// agent would have (the same builder) without identity, its token in a Secret of its own,
// labelled with the pool, its pod selected by LabelPoolMember, owned by the pool, its home
// deleted with it. OnDelete (as
// every agent's): the agent that adopts it rewrites its template without restarting the pod.
func BuildMember(gp *agentsv1.GatewayPool, ns, id, version string, o Options) (*appsv1.StatefulSet, error) {
	o = o.withDefaults()
	name := memberPrefix + id
	pseudo := &agentsv1.Agent{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}
	sts, err := buildStatefulSet(pseudo, runtime.Desired{EngineVersion: version, GatewayTokenSecret: memberTokenSecret(name)}, o)
	if err != nil {
		return nil, err
	}
	labels := memberLabels(gp.Name, id, version, o)
	sts.Labels = labels
	sts.Annotations = map[string]string{agentsv1.AnnotationCreated: "true"}
	sts.OwnerReferences = []metav1.OwnerReference{poolOwner(gp)}
	sts.Spec.Selector = &metav1.LabelSelector{MatchLabels: memberSelector(name)}
	sts.Spec.Template.Labels = maps.Clone(labels)
	sts.Spec.VolumeClaimTemplates[0].Labels = maps.Clone(labels)
	// A member that no agent adopted holds nobody's files: its home goes with it (the agent
	// that adopts it applies its own StatefulSet, which retains the home).
	sts.Spec.PersistentVolumeClaimRetentionPolicy.WhenDeleted = appsv1.DeletePersistentVolumeClaimRetentionPolicyType
	return sts, nil
}

// BuildMemberToken is the Secret holding member sts's gateway token, owned by the pool until
// the StatefulSet exists (then by the StatefulSet).
func BuildMemberToken(gp *agentsv1.GatewayPool, sts *appsv1.StatefulSet, token string) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Name: memberTokenSecret(sts.Name), Namespace: sts.Namespace, Labels: maps.Clone(sts.Labels),
			OwnerReferences: []metav1.OwnerReference{poolOwner(gp)},
		},
		Type: corev1.SecretTypeOpaque,
		Data: map[string][]byte{TokenKey: []byte(token)},
	}
}

// BuildMemberNetworkPolicy is the default-deny NetworkPolicy of member sts (Network.Enabled):
// an agent's, for an agent that needs no egress of its own, selecting the member's pod. It
// stays with the StatefulSet once adopted, next to the agent's own policy (which allows at
// least as much).
func BuildMemberNetworkPolicy(gp *agentsv1.GatewayPool, sts *appsv1.StatefulSet, o Options) (*networkingv1.NetworkPolicy, error) {
	o = o.withDefaults()
	pseudo := &agentsv1.Agent{ObjectMeta: metav1.ObjectMeta{Name: sts.Name, Namespace: sts.Namespace}}
	np, err := buildNetworkPolicy(pseudo, runtime.Desired{}, o)
	if err != nil {
		return nil, err
	}
	np.Labels = maps.Clone(sts.Labels)
	np.OwnerReferences = []metav1.OwnerReference{poolOwner(gp)}
	np.Spec.PodSelector = metav1.LabelSelector{MatchLabels: memberSelector(sts.Name)}
	return np, nil
}

// adoptedShape makes the agent's StatefulSet fit the member it adopted: the member's selector
// (immutable) and its label on the pod template, and the reservation kept as a label (so a
// cache that lags behind the agent's annotation still finds the StatefulSet).
func adoptedShape(sts *appsv1.StatefulSet, a *agentsv1.Agent) {
	id := memberID(sts.Name)
	sts.Labels[LabelPoolMember] = id
	sts.Labels[LabelReservedFor] = string(a.UID)
	sts.Spec.Template.Labels[LabelPoolMember] = id
}

// claimable reports whether a new agent can take a running member as it is: only what a
// running gateway takes without a restart differs (identity, the token Secret's name). An
// agent that needs environment of its own, resources or a RuntimeClass other than the
// platform's, or is to be stopped, starts cold.
func claimable(a *agentsv1.Agent, d runtime.Desired, o Options) bool {
	return !d.Stopped && len(d.Env) == 0 && a.Spec.Resources == nil &&
		(d.RuntimeClassName == "" || d.RuntimeClassName == o.RuntimeClassName)
}
