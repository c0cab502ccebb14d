package domain

import (
	"context"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
)

// DefaultTargetPort is the agent port a Domain routes to when spec.targetPort is unset (the
// gateway's port).
const DefaultTargetPort int32 = 18789

// Router sends a Domain's host to its agent. Both methods are idempotent.
type Router interface {
	// Route makes d.Status.Host reach agent on d's target port.
	Route(ctx context.Context, d *agentsv1.Domain, agent *agentsv1.Agent) error
	// Unroute stops routing d's host.
	Unroute(ctx context.Context, d *agentsv1.Domain) error
}

// routeDescriber is implemented by routers that say what they did (the Routed condition's
// message).
type routeDescriber interface {
	Describe(d *agentsv1.Domain) string
}

func targetPort(d *agentsv1.Domain) int32 {
	if d.Spec.TargetPort > 0 {
		return d.Spec.TargetPort
	}
	return DefaultTargetPort
}

// Ingress settings.
const (
	// ClusterIssuerAnnotation asks cert-manager for a certificate from a ClusterIssuer.
	ClusterIssuerAnnotation = "cert-manager.io/cluster-issuer"
)

// IngressRouter (runtime kube) routes with a networking.k8s.io/v1 Ingress named after the
// Domain and owned by it: host -> a Service of the Domain's own (ServiceName, also owned
// by it) that selects the agent's gateway pod and exposes the target port. Agents have no
// Service each (one headless Service per namespace names their pods), so a Domain brings the
// one its Ingress needs: with a cluster address, which every ingress controller can route to.
type IngressRouter struct {
	Client client.Client
	Scheme *runtime.Scheme
	// ClassName is spec.ingressClassName ("" leaves the cluster's default class).
	ClassName string
	// ClusterIssuer, when set, asks cert-manager for a certificate (annotation
	// cert-manager.io/cluster-issuer) stored in the Secret `<domain>-tls`.
	ClusterIssuer string
	// Annotations are added to every Ingress (ingress-controller settings).
	Annotations map[string]string
	// HTTPRoutes says the cluster serves the Gateway API: an HTTPRoute a Domain has from
	// GatewayRouter (an earlier --domain-gateway) is deleted once its Ingress is made.
	HTTPRoutes bool
}

// +kubebuilder:rbac:groups=networking.k8s.io,resources=ingresses,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",resources=services,verbs=get;list;watch;create;update;patch;delete

// ServiceName is the Service that d's Ingress routes to.
func ServiceName(d *agentsv1.Domain) string { return agentsv1.ServiceNameFor("domain", d.Name) }

// Route creates or updates d's Service and Ingress.
func (r *IngressRouter) Route(ctx context.Context, d *agentsv1.Domain, agent *agentsv1.Agent) error {
	if err := r.routeService(ctx, d, agent); err != nil {
		return fmt.Errorf("domain service: %w", err)
	}
	ing := &networkingv1.Ingress{}
	ing.Name, ing.Namespace = d.Name, d.Namespace
	_, err := controllerutil.CreateOrUpdate(ctx, r.Client, ing, func() error {
		want := r.desiredIngress(d, agent)
		if ing.Labels == nil {
			ing.Labels = map[string]string{}
		}
		for k, v := range want.Labels {
			ing.Labels[k] = v
		}
		if ing.Annotations == nil {
			ing.Annotations = map[string]string{}
		}
		for k, v := range want.Annotations {
			ing.Annotations[k] = v
		}
		if r.ClusterIssuer == "" {
			delete(ing.Annotations, ClusterIssuerAnnotation)
		}
		ing.Spec = want.Spec
		return controllerutil.SetControllerReference(d, ing, r.Scheme)
	})
	if err != nil || !r.HTTPRoutes {
		return err
	}
	return deleteDomainObject(ctx, r.Client, &gatewayv1.HTTPRoute{}, d)
}

// Owned are the kinds the Domain controller watches for this router.
func (r *IngressRouter) Owned() []client.Object {
	if r.HTTPRoutes {
		return []client.Object{&networkingv1.Ingress{}, &gatewayv1.HTTPRoute{}}
	}
	return []client.Object{&networkingv1.Ingress{}}
}

// desiredIngress is the Ingress that routes d to agent.
func (r *IngressRouter) desiredIngress(d *agentsv1.Domain, agent *agentsv1.Agent) *networkingv1.Ingress {
	prefix := networkingv1.PathTypePrefix
	ing := &networkingv1.Ingress{}
	ing.Labels = map[string]string{agentsv1.LabelDomain: d.Name, "app.kubernetes.io/part-of": "agentplane"}
	ing.Annotations = map[string]string{}
	for k, v := range r.Annotations {
		ing.Annotations[k] = v
	}
	if r.ClassName != "" {
		ing.Spec.IngressClassName = &r.ClassName
	}
	ing.Spec.Rules = []networkingv1.IngressRule{{
		Host: d.Status.Host,
		IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{
			Paths: []networkingv1.HTTPIngressPath{{
				Path: "/", PathType: &prefix,
				Backend: networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{
					Name: ServiceName(d), Port: networkingv1.ServiceBackendPort{Number: targetPort(d)},
				}},
			}},
		}},
	}}
	if r.ClusterIssuer != "" {
		ing.Annotations[ClusterIssuerAnnotation] = r.ClusterIssuer
		ing.Spec.TLS = []networkingv1.IngressTLS{{Hosts: []string{d.Status.Host}, SecretName: d.Name + "-tls"}}
	}
	return ing
}

// routeService creates or updates d's Service: agent's gateway pod on d's target port.
func (r *IngressRouter) routeService(ctx context.Context, d *agentsv1.Domain, agent *agentsv1.Agent) error {
	return routeDomainService(ctx, r.Client, r.Scheme, d, agent)
}

// routeDomainService creates or updates d's Service (ServiceName), owned by d, that
// selects agent's gateway pod on d's target port: what an Ingress or an HTTPRoute routes to.
func routeDomainService(ctx context.Context, c client.Client, scheme *runtime.Scheme, d *agentsv1.Domain, agent *agentsv1.Agent) error {
	svc := &corev1.Service{}
	svc.Name, svc.Namespace = ServiceName(d), d.Namespace
	_, err := controllerutil.CreateOrUpdate(ctx, c, svc, func() error {
		if svc.Labels == nil {
			svc.Labels = map[string]string{}
		}
		// Managed-by: the manager caches only agentplane's Services.
		svc.Labels[agentsv1.LabelDomain] = d.Name
		svc.Labels[agentsv1.LabelAppPartOf] = agentsv1.ManagedBy
		svc.Labels[agentsv1.LabelAppManagedBy] = agentsv1.ManagedBy
		port := targetPort(d)
		svc.Spec.Type = corev1.ServiceTypeClusterIP
		svc.Spec.Selector = agentsv1.GatewayPodSelector(agent.Name)
		svc.Spec.Ports = []corev1.ServicePort{{Name: "http", Port: port, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(port)}}
		return controllerutil.SetControllerReference(d, svc, scheme)
	})
	return err
}

// Unroute deletes d's Ingress and Service (and its HTTPRoute, with HTTPRoutes).
func (r *IngressRouter) Unroute(ctx context.Context, d *agentsv1.Domain) error {
	if r.HTTPRoutes {
		if err := deleteDomainObject(ctx, r.Client, &gatewayv1.HTTPRoute{}, d); err != nil {
			return err
		}
	}
	ing := &networkingv1.Ingress{}
	ing.Name, ing.Namespace = d.Name, d.Namespace
	if err := client.IgnoreNotFound(r.Client.Delete(ctx, ing)); err != nil {
		return err
	}
	svc := &corev1.Service{}
	svc.Name, svc.Namespace = ServiceName(d), d.Namespace
	return client.IgnoreNotFound(r.Client.Delete(ctx, svc))
}

// Describe is the Routed condition's message.
func (r *IngressRouter) Describe(d *agentsv1.Domain) string {
	return fmt.Sprintf("ingress %s sends %s to agent %s port %d", d.Name, d.Status.Host, d.Spec.AgentRef.Name, targetPort(d))
}

// RecordedRoute is a route RecordRouter keeps.
type RecordedRoute struct {
	Host, Namespace, Agent string
	Port                   int32
}

// RecordRouter (local mode) only records routes: in local mode agents listen on this host
// and nothing fronts them.
type RecordRouter struct {
	mu     sync.Mutex
	routes map[string]RecordedRoute
}

// Route records d's route.
func (r *RecordRouter) Route(_ context.Context, d *agentsv1.Domain, agent *agentsv1.Agent) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.routes == nil {
		r.routes = map[string]RecordedRoute{}
	}
	r.routes[d.Namespace+"/"+d.Name] = RecordedRoute{Host: d.Status.Host, Namespace: d.Namespace, Agent: agent.Name, Port: targetPort(d)}
	return nil
}

// Unroute forgets d's route.
func (r *RecordRouter) Unroute(_ context.Context, d *agentsv1.Domain) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.routes, d.Namespace+"/"+d.Name)
	return nil
}

// Describe is the Routed condition's message.
func (r *RecordRouter) Describe(d *agentsv1.Domain) string {
	return fmt.Sprintf("%s -> agent %s port %d recorded (local mode)", d.Status.Host, d.Spec.AgentRef.Name, targetPort(d))
}

// Routes returns the recorded routes by Domain `namespace/name`.
func (r *RecordRouter) Routes() map[string]RecordedRoute {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string]RecordedRoute, len(r.routes))
	for k, v := range r.routes {
		out[k] = v
	}
	return out
}
