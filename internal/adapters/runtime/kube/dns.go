package kube

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// DNSServiceName is the cluster DNS's Service in DNSNamespace.
const DNSServiceName = "kube-dns"

// +kubebuilder:rbac:groups=discovery.k8s.io,resources=endpointslices,verbs=get;list;watch

// DiscoverDNS finds where the cluster DNS answers when it is not a pod the DNS labels select:
// the endpoint addresses (as CIDRs) of a kube-dns Service in namespace ns without a selector
// (a resolver on the node, outside the pod network). It returns nil for a Service with a
// selector (its pods are the peers) and for no Service.
func DiscoverDNS(ctx context.Context, c client.Reader, ns string) ([]string, error) {
	var svc corev1.Service
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: DNSServiceName}, &svc); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("cluster DNS Service: %w", err)
	}
	if len(svc.Spec.Selector) > 0 {
		return nil, nil
	}
	var slices discoveryv1.EndpointSliceList
	if err := c.List(ctx, &slices, client.InNamespace(ns), client.MatchingLabels{discoveryv1.LabelServiceName: DNSServiceName}); err != nil {
		return nil, fmt.Errorf("cluster DNS endpoints: %w", err)
	}
	var out []string
	for _, s := range slices.Items {
		for _, e := range s.Endpoints {
			for _, a := range e.Addresses {
				if cidr, err := HostCIDR(a); err == nil {
					out = append(out, cidr)
				}
			}
		}
	}
	return sortedUnique(out), nil
}
