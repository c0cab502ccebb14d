package domain

import (
	"context"
	"fmt"
	"strings"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
)

// GatewayRef names the Gateway (and optionally its listener) that Domains' HTTPRoutes attach
// to: `NAMESPACE/NAME[/SECTION]`.
type GatewayRef struct {
	Namespace, Name, Section string
}

// ParseGatewayRef parses NAMESPACE/NAME[/SECTION].
func ParseGatewayRef(s string) (GatewayRef, error) {
	parts := strings.Split(s, "/")
	if len(parts) < 2 || len(parts) > 3 || parts[0] == "" || parts[1] == "" || (len(parts) == 3 && parts[2] == "") {
		return GatewayRef{}, fmt.Errorf("%q: want NAMESPACE/NAME[/SECTION]", s)
	}
	g := GatewayRef{Namespace: parts[0], Name: parts[1]}
	if len(parts) == 3 {
		g.Section = parts[2]
	}
	return g, nil
}

func (g GatewayRef) String() string {
	if g.Section != "" {
		return g.Namespace + "/" + g.Name + "/" + g.Section
	}
	return g.Namespace + "/" + g.Name
}

// +kubebuilder:rbac:groups=gateway.networking.k8s.io,resources=httproutes,verbs=get;list;watch;create;update;patch;delete

// GatewayRouter (runtime kube, --domain-gateway) routes with a Gateway API HTTPRoute named
// after the Domain and owned by it, attached to Gateway: host -> the Domain's Service
// (ServiceName, as with IngressRouter). TLS belongs to the Gateway's listeners (the
// platform team's cert-manager annotation on the Gateway), not to the route. An Ingress the
// Domain had from IngressRouter is deleted.
type GatewayRouter struct {
	Client  client.Client
	Scheme  *runtime.Scheme
	Gateway GatewayRef
}

// Route creates or updates d's Service and HTTPRoute and deletes d's Ingress, if any.
func (r *GatewayRouter) Route(ctx context.Context, d *agentsv1.Domain, agent *agentsv1.Agent) error {
	if err := routeDomainService(ctx, r.Client, r.Scheme, d, agent); err != nil {
		return fmt.Errorf("domain service: %w", err)
	}
	route := &gatewayv1.HTTPRoute{}
	route.Name, route.Namespace = d.Name, d.Namespace
	_, err := controllerutil.CreateOrUpdate(ctx, r.Client, route, func() error {
		if route.Labels == nil {
			route.Labels = map[string]string{}
		}
		route.Labels[agentsv1.LabelDomain] = d.Name
		route.Labels[agentsv1.LabelAppPartOf] = agentsv1.ManagedBy
		route.Spec = BuildHTTPRouteSpec(d, r.Gateway)
		return controllerutil.SetControllerReference(d, route, r.Scheme)
	})
	if err != nil {
		return fmt.Errorf("httproute: %w", err)
	}
	return deleteDomainObject(ctx, r.Client, &networkingv1.Ingress{}, d)
}

// BuildHTTPRouteSpec is the spec of d's HTTPRoute: attached to gw, for d's host, every path
// to the Domain's Service on d's target port. The fields the API server defaults are set
// (group, kind, weight, the path match), so an unchanged route compares equal and is not
// written again.
func BuildHTTPRouteSpec(d *agentsv1.Domain, gw GatewayRef) gatewayv1.HTTPRouteSpec {
	parent := gatewayv1.ParentReference{
		Group:     ptr.To(gatewayv1.Group(gatewayv1.GroupName)),
		Kind:      ptr.To(gatewayv1.Kind("Gateway")),
		Namespace: ptr.To(gatewayv1.Namespace(gw.Namespace)),
		Name:      gatewayv1.ObjectName(gw.Name),
	}
	if gw.Section != "" {
		parent.SectionName = ptr.To(gatewayv1.SectionName(gw.Section))
	}
	return gatewayv1.HTTPRouteSpec{
		CommonRouteSpec: gatewayv1.CommonRouteSpec{ParentRefs: []gatewayv1.ParentReference{parent}},
		Hostnames:       []gatewayv1.Hostname{gatewayv1.Hostname(d.Status.Host)},
		Rules: []gatewayv1.HTTPRouteRule{{
			Matches: []gatewayv1.HTTPRouteMatch{{Path: &gatewayv1.HTTPPathMatch{
				Type: ptr.To(gatewayv1.PathMatchPathPrefix), Value: ptr.To("/"),
			}}},
			BackendRefs: []gatewayv1.HTTPBackendRef{{BackendRef: gatewayv1.BackendRef{
				BackendObjectReference: gatewayv1.BackendObjectReference{
					Group: ptr.To(gatewayv1.Group("")),
					Kind:  ptr.To(gatewayv1.Kind("Service")),
					Name:  gatewayv1.ObjectName(ServiceName(d)),
					Port:  ptr.To(gatewayv1.PortNumber(targetPort(d))),
				},
				Weight: ptr.To[int32](1),
			}}},
		}},
	}
}

// Unroute deletes d's HTTPRoute, Ingress and Service.
func (r *GatewayRouter) Unroute(ctx context.Context, d *agentsv1.Domain) error {
	if err := deleteDomainObject(ctx, r.Client, &gatewayv1.HTTPRoute{}, d); err != nil {
		return err
	}
	return (&IngressRouter{Client: r.Client}).Unroute(ctx, d)
}

// Describe is the Routed condition's message.
func (r *GatewayRouter) Describe(d *agentsv1.Domain) string {
	return fmt.Sprintf("httproute %s on gateway %s sends %s to agent %s port %d", d.Name, r.Gateway, d.Status.Host, d.Spec.AgentRef.Name, targetPort(d))
}

// Owned are the kinds the Domain controller watches for this router.
func (r *GatewayRouter) Owned() []client.Object {
	return []client.Object{&gatewayv1.HTTPRoute{}, &networkingv1.Ingress{}}
}

// deleteDomainObject deletes obj's kind named after d when the cache shows one that d
// controls: a pass with nothing to delete costs no request.
func deleteDomainObject(ctx context.Context, c client.Client, obj client.Object, d *agentsv1.Domain) error {
	if err := c.Get(ctx, client.ObjectKey{Namespace: d.Namespace, Name: d.Name}, obj); err != nil {
		return client.IgnoreNotFound(err)
	}
	if !metav1.IsControlledBy(obj, d) {
		return nil
	}
	uid := obj.GetUID()
	return client.IgnoreNotFound(c.Delete(ctx, obj, client.Preconditions{UID: &uid}))
}
