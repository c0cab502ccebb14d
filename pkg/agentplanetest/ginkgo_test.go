package agentplanetest_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/pkg/agentplanetest"
)

// The kit in a Ginkgo suite: Start in BeforeAll, Stop through DeferCleanup, the matchers in
// Eventually.
func TestWithGinkgo(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "agentplanetest under Ginkgo")
}

var _ = Describe("an agent under Ginkgo", Ordered, func() {
	var p *agentplanetest.Platform
	BeforeAll(func(ctx context.Context) {
		var err error
		p, err = agentplanetest.Start(ctx, cfg)
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(p.Stop)
	})

	It("runs, and is deleted through the facade", func(ctx context.Context) {
		tok, err := p.Token("kit-ginkgo")
		Expect(err).NotTo(HaveOccurred())
		a := &agentsv1.Agent{
			ObjectMeta: metav1.ObjectMeta{Namespace: "kit-ginkgo", Name: "g"},
			Spec:       agentsv1.AgentSpec{DisplayName: "Ginkgo"},
		}
		Expect(p.Client().Create(ctx, a)).To(Succeed())
		Eventually(agentplanetest.Fresh(ctx, p.Client(), a)).WithTimeout(time.Minute).Should(agentplanetest.HavePhase(agentplanetest.PhaseRunning))

		req, err := http.NewRequestWithContext(ctx, http.MethodDelete, p.URL()+"/v0/agents/g", nil)
		Expect(err).NotTo(HaveOccurred())
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := http.DefaultClient.Do(req)
		Expect(err).NotTo(HaveOccurred())
		resp.Body.Close()
		Expect(resp.StatusCode).To(Equal(http.StatusOK))
		Eventually(func() error {
			return p.Client().Get(ctx, client.ObjectKeyFromObject(a), &agentsv1.Agent{})
		}).WithTimeout(time.Minute).Should(Satisfy(apierrors.IsNotFound))
	})
})
