package controllers_test

import (
	"os/exec"
	"path/filepath"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	domainctrl "github.com/agentplane/agentplane/controllers/domain"
)

// installGatewayAPI installs the Gateway API's HTTPRoute CRD from the module go.mod pins
// (sigs.k8s.io/gateway-api, config/crd/standard), as a cluster with a Gateway controller has it.
func installGatewayAPI() error {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "sigs.k8s.io/gateway-api").Output()
	if err != nil {
		return err
	}
	crd := filepath.Join(strings.TrimSpace(string(out)), "config", "crd", "standard", "gateway.networking.k8s.io_httproutes.yaml")
	_, err = envtest.InstallCRDs(env.Config, envtest.CRDInstallOptions{Paths: []string{crd}, ErrorIfPathMissing: true})
	return err
}

var _ = Describe("GatewayRouter", func() {
	It("routes a Domain with an HTTPRoute on the Gateway, owned by the Domain, and replaces its Ingress", func() {
		ns := newWorkspaceNS("dom-gateway")
		agent := newAgent(ns, "a1")
		d := newDomain(ns, "web", agent.Name, func(d *agentsv1.Domain) {
			d.Spec.CustomDomain = "web.example.com"
			d.Spec.TargetPort = 8080
		})
		d.Status.Host = "web.example.com"

		By("a Domain routed by Ingress before --domain-gateway")
		ingress := &domainctrl.IngressRouter{Client: k8sClient, Scheme: env.Scheme, HTTPRoutes: true}
		Expect(ingress.Route(ctx, d, agent)).To(Succeed())
		Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "web"}, &networkingv1.Ingress{})).To(Succeed())

		gw, err := domainctrl.ParseGatewayRef("gateways/public/https")
		Expect(err).NotTo(HaveOccurred())
		r := &domainctrl.GatewayRouter{Client: k8sClient, Scheme: env.Scheme, Gateway: gw}
		Expect(r.Route(ctx, d, agent)).To(Succeed())

		route := &gatewayv1.HTTPRoute{}
		Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "web"}, route)).To(Succeed())
		Expect(route.OwnerReferences).To(ConsistOf(And(HaveField("UID", d.UID), HaveField("Controller", ptr.To(true)))))
		Expect(route.Spec.ParentRefs).To(HaveLen(1))
		parent := route.Spec.ParentRefs[0]
		Expect(parent.Name).To(Equal(gatewayv1.ObjectName("public")))
		Expect(parent.Namespace).To(Equal(ptr.To(gatewayv1.Namespace("gateways"))))
		Expect(parent.SectionName).To(Equal(ptr.To(gatewayv1.SectionName("https"))))
		Expect(parent.Kind).To(Equal(ptr.To(gatewayv1.Kind("Gateway"))))
		Expect(route.Spec.Hostnames).To(ConsistOf(gatewayv1.Hostname("web.example.com")))
		Expect(route.Spec.Rules).To(HaveLen(1))
		Expect(route.Spec.Rules[0].BackendRefs).To(HaveLen(1))
		backend := route.Spec.Rules[0].BackendRefs[0]
		Expect(string(backend.Name)).To(Equal(domainctrl.ServiceName(d)))
		Expect(backend.Port).To(Equal(ptr.To(gatewayv1.PortNumber(8080))))
		Expect(backend.Kind).To(Equal(ptr.To(gatewayv1.Kind("Service"))))

		By("the Ingress of the Ingress mode is gone; the Domain's Service stays")
		err = k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "web"}, &networkingv1.Ingress{})
		Expect(apierrors.IsNotFound(err)).To(BeTrue(), "ingress: %v", err)
		Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: domainctrl.ServiceName(d)}, &corev1.Service{})).To(Succeed())

		By("an unchanged pass writes nothing (the fields the API server defaults are set)")
		rv := route.ResourceVersion
		Expect(r.Route(ctx, d, agent)).To(Succeed())
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(route), route)).To(Succeed())
		Expect(route.ResourceVersion).To(Equal(rv))

		By("a new target port follows")
		d.Spec.TargetPort = 3000
		Expect(r.Route(ctx, d, agent)).To(Succeed())
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(route), route)).To(Succeed())
		Expect(route.Spec.Rules[0].BackendRefs[0].Port).To(Equal(ptr.To(gatewayv1.PortNumber(3000))))

		By("back to Ingress: the HTTPRoute goes")
		Expect(ingress.Route(ctx, d, agent)).To(Succeed())
		Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "web"}, &networkingv1.Ingress{})).To(Succeed())
		err = k8sClient.Get(ctx, client.ObjectKeyFromObject(route), &gatewayv1.HTTPRoute{})
		Expect(apierrors.IsNotFound(err)).To(BeTrue(), "httproute: %v", err)

		By("Unroute removes the route, the Ingress and the Service")
		Expect(r.Route(ctx, d, agent)).To(Succeed())
		Expect(r.Unroute(ctx, d)).To(Succeed())
		Expect(apierrors.IsNotFound(k8sClient.Get(ctx, client.ObjectKeyFromObject(route), &gatewayv1.HTTPRoute{}))).To(BeTrue())
		Expect(apierrors.IsNotFound(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "web"}, &networkingv1.Ingress{}))).To(BeTrue())
		Expect(r.Unroute(ctx, d)).To(Succeed(), "idempotent")
	})

	It("parses NAMESPACE/NAME[/SECTION]", func() {
		gw, err := domainctrl.ParseGatewayRef("infra/public")
		Expect(err).NotTo(HaveOccurred())
		Expect(gw).To(Equal(domainctrl.GatewayRef{Namespace: "infra", Name: "public"}))
		for _, bad := range []string{"", "public", "infra/", "/public", "a/b/", "a/b/c/d"} {
			_, err := domainctrl.ParseGatewayRef(bad)
			Expect(err).To(HaveOccurred(), bad)
		}
	})
})
