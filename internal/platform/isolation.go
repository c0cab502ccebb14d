package platform

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	domainctrl "github.com/agentplane/agentplane/controllers/domain"
	"github.com/agentplane/agentplane/internal/adapters/runtime/kube"
)

// domainRouter is runtime kube's Router: HTTPRoutes on Domains.Gateway when set, else
// Ingresses (which remove the HTTPRoutes of an earlier Gateway when the cluster serves the
// Gateway API).
func (p *Platform) domainRouter() (domainctrl.Router, error) {
	mgr, o := p.Manager, p.opts.Domains
	if o.Gateway != "" {
		gw, err := domainctrl.ParseGatewayRef(o.Gateway)
		if err != nil {
			return nil, fmt.Errorf("--domain-gateway: %w", err)
		}
		return &domainctrl.GatewayRouter{Client: mgr.GetClient(), Scheme: mgr.GetScheme(), Gateway: gw}, nil
	}
	_, err := mgr.GetRESTMapper().RESTMapping(schema.GroupKind{Group: gatewayv1.GroupVersion.Group, Kind: "HTTPRoute"}, gatewayv1.GroupVersion.Version)
	return &domainctrl.IngressRouter{
		Client: mgr.GetClient(), Scheme: mgr.GetScheme(),
		ClassName: o.IngressClass, ClusterIssuer: o.ClusterIssuer, HTTPRoutes: err == nil,
	}, nil
}

// networkOptions shape the agents' NetworkPolicies (kube runtime): the manager's pods are
// those of config/manager in the system namespace, reached on the facade's port; the cluster
// DNS is --agent-dns, else what kube.DiscoverDNS finds.
func (p *Platform) networkOptions() kube.NetworkOptions {
	o := p.opts.Runtime
	n := kube.NetworkOptions{
		Enabled: o.NetworkPolicy, SystemNamespace: p.opts.SystemNamespace, ModelProxyURL: p.modelBase,
		IngressNamespaces: o.IngressNamespaces, Egress: o.Egress, DNSAddresses: o.DNS,
	}
	if n.Enabled && len(n.DNSAddresses) == 0 {
		// Once, at start: where the cluster DNS answers is a property of the cluster.
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		addrs, err := kube.DiscoverDNS(ctx, p.Manager.GetAPIReader(), kube.DefaultDNSNamespace)
		if err != nil {
			p.opts.Log.Error(err, "agents' DNS egress: the cluster DNS Service could not be read; allowing the kube-dns pods")
		}
		n.DNSAddresses = addrs
	}
	if _, port, err := net.SplitHostPort(p.opts.APIAddr); err == nil {
		if v, err := strconv.ParseUint(port, 10, 16); err == nil && v > 0 {
			n.FacadePort = int32(v)
		}
	}
	return n
}
