package controllers_test

import (
	"context"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	renderingrolloutctrl "github.com/agentplane/agentplane/controllers/renderingrollout"
)

// allowedOf are the renderings the agents are allowed to restart onto, in order.
func allowedOf(agents []*agentsv1.Agent) func() []string {
	return func() []string {
		var out []string
		for _, a := range agents {
			out = append(out, getAgent(a).Annotations[agentsv1.AnnotationAllowedRendering])
		}
		return out
	}
}

// rolloutReadyMessage is the message of the rollout's Ready condition.
func rolloutReadyMessage(name string) func() string {
	return func() string {
		if c := meta.FindStatusCondition(getRollout(name).Status.Conditions, agentsv1.ConditionReady); c != nil {
			return c.Message
		}
		return ""
	}
}

func rolloutSummary(name string) func() []any {
	return func() []any {
		rr := getRollout(name)
		return []any{rr.Status.Phase, rr.Status.CurrentWave, rr.Status.Current, rr.Status.Total}
	}
}

// createRollout makes the RenderingRollout of platform for the agents of ns (before the
// manager runs: it then finds it and makes none).
func createRollout(platform, ns string, mut func(*agentsv1.RenderingRollout)) string {
	rr := &agentsv1.RenderingRollout{ObjectMeta: metav1.ObjectMeta{Name: renderingrolloutctrl.RenderingRolloutName(platform)},
		Spec: agentsv1.RenderingRolloutSpec{Rendering: platform, Workspaces: []string{ns}}}
	mut(rr)
	Expect(k8sClient.Create(ctx, rr)).To(Succeed())
	DeferCleanup(func() { _ = k8sClient.Delete(context.Background(), rr) })
	return rr.Name
}

var _ = Describe("RenderingRollout controller", func() {
	It("makes the manager's RenderingRollout when it leads, and deletes the ones it made for earlier renderings", func() {
		old := &agentsv1.RenderingRollout{ObjectMeta: metav1.ObjectMeta{Name: renderingrolloutctrl.RenderingRolloutName("p0earlier"),
			Labels: map[string]string{agentsv1.LabelRenderingRollout: "manager"}}, Spec: agentsv1.RenderingRolloutSpec{Rendering: "p0earlier"}}
		Expect(k8sClient.Create(ctx, old)).To(Succeed())
		mine := renderingrolloutctrl.RenderingRolloutName("p3made")
		DeferCleanup(func() {
			_ = k8sClient.Delete(context.Background(), &agentsv1.RenderingRollout{ObjectMeta: metav1.ObjectMeta{Name: mine}})
		})
		DeferCleanup(startRenderingManager("p3made", clock.RealClock{}))

		Eventually(func() error { return k8sClient.Get(ctx, client.ObjectKey{Name: mine}, &agentsv1.RenderingRollout{}) }).Should(Succeed())
		rr := getRollout(mine)
		Expect(rr.Spec.Rendering).To(Equal("p3made"))
		Expect(rr.Spec.WavePercent).To(Equal(int32(25)))
		Eventually(func() bool {
			return apierrors.IsNotFound(k8sClient.Get(ctx, client.ObjectKeyFromObject(old), &agentsv1.RenderingRollout{}))
		}).Should(BeTrue())
	})

	It("restarts the outdated gateways in waves of the configured size, each agent snapshotted first", func() {
		ns, platform := "rendering-waves", "p1waves"
		d := startAgentDouble(ns)
		d.platform = platform
		agents := upgradeAgents(ns, 4, "")
		for _, a := range agents { // every agent reports its outdated rendering
			Eventually(func() agentsv1.AgentRendering { return getAgent(a).Status.Rendering }).Should(Equal(agentsv1.RenderingOutdated))
		}
		d.hold(true)
		name := createRollout(platform, ns, func(rr *agentsv1.RenderingRollout) { rr.Spec.WavePercent = 50 })
		DeferCleanup(startRenderingManager(platform, clock.RealClock{}))

		// Wave 1 takes two agents; while their snapshots are not taken, no restart is allowed:
		// the pass that found both not taken says so.
		Eventually(func() int { return len(upgradeSnapshots(agents[0])) + len(upgradeSnapshots(agents[1])) }).Should(Equal(2))
		Eventually(rolloutReadyMessage(name)).Should(And(
			MatchRegexp(`waiting for rendering-waves/agent-a: snapshot agent-a-upgrade-[0-9a-f]+: not started`),
			MatchRegexp(`rendering-waves/agent-b: snapshot agent-b-upgrade-[0-9a-f]+: not started`)))
		Expect(allowedOf(agents)()).To(Equal([]string{"", "", "", ""}))
		Expect(upgradeSnapshots(agents[2])).To(BeEmpty())
		Expect(rolloutSummary(name)()).To(Equal([]any{agentsv1.UpgradeProgressing, int32(1), int32(0), int32(4)}))

		d.hold(false)
		Eventually(rolloutSummary(name)).Should(Equal([]any{agentsv1.UpgradeSucceeded, int32(2), int32(4), int32(4)}))
		rr := getRollout(name)
		Expect(rr.Status.Waves).To(HaveLen(2))
		Expect(rr.Status.Waves[0].Agents).To(Equal([]string{ns + "/agent-a", ns + "/agent-b"}))
		Expect(rr.Status.Waves[1].Agents).To(Equal([]string{ns + "/agent-c", ns + "/agent-d"}))
		Expect(rr.Status.Waves[1].StartedAt.Time).NotTo(BeTemporally("<", rr.Status.Waves[0].StartedAt.Time))
		for _, a := range agents {
			got := getAgent(a)
			Expect(got.Status.Rendering).To(Equal(agentsv1.RenderingCurrent))
			Expect(got.Annotations).To(HaveKeyWithValue(agentsv1.AnnotationAllowedRendering, got.Status.RenderingTarget))
			snaps := upgradeSnapshots(a)
			Expect(snaps).To(HaveLen(1))
			Expect(got.Annotations).To(HaveKeyWithValue(agentsv1.AnnotationUpgradeSnapshot, snaps[0].Status.CID))
			Expect(got.Spec.Engine.Version).To(BeEmpty(), "a rendering rollout changes no version")
		}
		Eventually(eventReasons("RenderingRollout", name)).Should(ContainElements(
			agentsv1.EventWaveStarted, agentsv1.EventSnapshotTaken, agentsv1.EventUpgraded, agentsv1.EventSucceeded))
	})

	It("halts on an agent not healthy on the new rendering in time, leaving the others on their old gateway", func() {
		ns, platform := "rendering-halt", "p2halt"
		d := startAgentDouble(ns)
		d.platform, d.brokenRendering = platform, true
		agents := upgradeAgents(ns, 2, "")
		clk := clocktesting.NewFakeClock(time.Now())
		passes := &passClock{PassiveClock: clk}
		name := createRollout(platform, ns, func(rr *agentsv1.RenderingRollout) {
			rr.Spec.WavePercent, rr.Spec.HealthTimeout = 50, &metav1.Duration{Duration: time.Minute}
		})
		DeferCleanup(startRenderingManager(platform, passes))

		Eventually(func() agentsv1.AgentRendering { return getAgent(agents[0]).Status.Rendering }).Should(Equal(agentsv1.RenderingCurrent))
		clk.Step(2 * time.Minute)
		pokeAgents(agents[:1])
		Eventually(func() agentsv1.EngineUpgradePhase { return getRollout(name).Status.Phase }).Should(Equal(agentsv1.UpgradeHalted))
		rr := getRollout(name)
		Expect(rr.Status.FailedAgents).To(Equal([]string{ns + "/agent-a"}))
		Expect(rr.Status.Current).To(Equal(int32(1)))
		Expect(getAgent(agents[0]).Annotations).To(HaveKeyWithValue(agentsv1.AnnotationUpgradeState, agentsv1.AgentUpgradeFailed))
		// Halted: a pass that began after the halt starts no next wave.
		passes.settle(agents)
		Expect(allowedOf(agents[1:])()).To(Equal([]string{""}))
		Expect(rolloutSummary(name)()).To(Equal([]any{agentsv1.UpgradeHalted, int32(1), int32(1), int32(2)}))
		Eventually(eventReasons("Agent", "agent-a")).Should(ContainElement(agentsv1.EventHalted))
		Eventually(eventReasons("RenderingRollout", name)).Should(ContainElement(agentsv1.EventHalted))
	})
})
