package controllers_test

import (
	"fmt"
	"k8s.io/apimachinery/pkg/api/meta"
	"os"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/devtools/testenv"
)

// versionsOf are the spec versions of the agents, in order.
func versionsOf(agents []*agentsv1.Agent) func() []string {
	return func() []string {
		var out []string
		for _, a := range agents {
			out = append(out, getAgent(a).Spec.Engine.Version)
		}
		return out
	}
}

func upgradeSummary(name string) func() []any {
	return func() []any {
		eu := getUpgrade(name)
		return []any{eu.Status.Phase, eu.Status.CurrentWave, eu.Status.Counts}
	}
}

// upgradeReadyMessage is the message of the policy's Ready condition.
func upgradeReadyMessage(name string) func() string {
	return func() string {
		if c := meta.FindStatusCondition(getUpgrade(name).Status.Conditions, agentsv1.ConditionReady); c != nil {
			return c.Message
		}
		return ""
	}
}

func waveAgents(name string) [][]string {
	var out [][]string
	for _, w := range getUpgrade(name).Status.Waves {
		out = append(out, w.Agents)
	}
	return out
}

// upgradeMetrics is the exposition of agentplane_engine_upgrade_agents for one policy.
func upgradeMetrics(policy string, pending, upgrading, upgraded, rolledBack int) string {
	return fmt.Sprintf(`# HELP agentplane_engine_upgrade_agents Agents selected by an EngineUpgrade, by state (pending, upgrading, upgraded, rolled_back).
# TYPE agentplane_engine_upgrade_agents gauge
agentplane_engine_upgrade_agents{policy=%[1]q,state="pending"} %[2]d
agentplane_engine_upgrade_agents{policy=%[1]q,state="rolled_back"} %[5]d
agentplane_engine_upgrade_agents{policy=%[1]q,state="upgraded"} %[4]d
agentplane_engine_upgrade_agents{policy=%[1]q,state="upgrading"} %[3]d
`, policy, pending, upgrading, upgraded, rolledBack)
}

var _ = Describe("EngineUpgrade controller", func() {
	It("rolls out in waves of the right size, in order, each agent snapshotted before its version changes", func() {
		ns := "upgrade-waves"
		d := startAgentDouble(ns)
		agents := upgradeAgents(ns, 4, "2026.9.5")
		reg := prometheus.NewRegistry()
		DeferCleanup(startUpgradeManager(clocktesting.NewFakeClock(time.Now()), reg))
		d.hold(true)
		createUpgrade("waves", ns, "2026.9.7", func(eu *agentsv1.EngineUpgrade) { eu.Spec.WavePercent = 50 })

		// Wave 1 takes the first two agents; their snapshots are asked for and, while they
		// are not taken, no version changes: the pass that found both not taken says so.
		Eventually(func() int { return len(upgradeSnapshots(agents[0])) + len(upgradeSnapshots(agents[1])) }).Should(Equal(2))
		Eventually(upgradeReadyMessage("waves")).Should(And(
			MatchRegexp(`waiting for upgrade-waves/agent-a: snapshot agent-a-upgrade-[0-9a-f]+: not started`),
			MatchRegexp(`upgrade-waves/agent-b: snapshot agent-b-upgrade-[0-9a-f]+: not started`)))
		Expect(versionsOf(agents)()).To(Equal([]string{"2026.9.5", "2026.9.5", "2026.9.5", "2026.9.5"}))
		Expect(waveAgents("waves")).To(Equal([][]string{{ns + "/agent-a", ns + "/agent-b"}}))
		Expect(upgradeSummary("waves")()).To(Equal([]any{agentsv1.UpgradeProgressing, int32(1), agentsv1.UpgradeCounts{Pending: 2, Upgrading: 2}}))
		Expect(upgradeSnapshots(agents[2])).To(BeEmpty())

		d.hold(false)
		Eventually(upgradeSummary("waves")).Should(Equal([]any{agentsv1.UpgradeSucceeded, int32(2), agentsv1.UpgradeCounts{Upgraded: 4}}))
		Expect(waveAgents("waves")).To(Equal([][]string{{ns + "/agent-a", ns + "/agent-b"}, {ns + "/agent-c", ns + "/agent-d"}}))
		eu := getUpgrade("waves")
		Expect(eu.Status.Waves[0].State).To(Equal(agentsv1.WaveSucceeded))
		// Wave 2 started only after every agent of wave 1 was healthy on the target.
		Expect(eu.Status.Waves[1].StartedAt.Time).NotTo(BeTemporally("<", eu.Status.Waves[0].StartedAt.Time))
		Expect(versionsOf(agents)()).To(Equal([]string{"2026.9.7", "2026.9.7", "2026.9.7", "2026.9.7"}))
		for _, a := range agents {
			got := getAgent(a)
			snaps := upgradeSnapshots(a)
			Expect(snaps).To(HaveLen(1))
			Expect(snaps[0].Labels).To(HaveKeyWithValue(agentsv1.LabelUpgrade, "waves"))
			Expect(got.Annotations).To(HaveKeyWithValue(agentsv1.AnnotationUpgradeSnapshot, snaps[0].Status.CID))
			Expect(got.Annotations).To(HaveKeyWithValue(agentsv1.AnnotationUpgradePreviousVersion, "2026.9.5"))
			Expect(got.Annotations).To(HaveKeyWithValue(agentsv1.AnnotationUpgradeState, agentsv1.AgentUpgradeUpgraded))
			Expect(got.Spec.DesiredSnapshot).To(BeEmpty())
		}
		Eventually(eventReasons("EngineUpgrade", "waves")).Should(ContainElements(
			agentsv1.EventWaveStarted, agentsv1.EventSnapshotTaken, agentsv1.EventUpgraded, agentsv1.EventSucceeded))
		Eventually(eventReasons("Agent", "agent-a")).Should(ContainElements(agentsv1.EventSnapshotTaken, agentsv1.EventUpgraded))

		// An agent created later on another version is taken by a new wave.
		late := createAgent(ns, "agent-late", func(a *agentsv1.Agent) { a.Spec.Engine.Version = "2026.9.5" })
		Eventually(versionsOf([]*agentsv1.Agent{late})).Should(Equal([]string{"2026.9.7"}))
		Eventually(upgradeSummary("waves")).Should(Equal([]any{agentsv1.UpgradeSucceeded, int32(3), agentsv1.UpgradeCounts{Upgraded: 5}}))
		Eventually(func() error {
			return testutil.GatherAndCompare(reg, strings.NewReader(upgradeMetrics("waves", 0, 0, 5, 0)), "agentplane_engine_upgrade_agents")
		}).Should(Succeed())
		// A deleted policy leaves no series.
		Expect(k8sClient.Delete(ctx, getUpgrade("waves"))).To(Succeed())
		Eventually(func() (int, error) { return testutil.GatherAndCount(reg, "agentplane_engine_upgrade_agents") }).Should(Equal(0))
	})

	It("rolls back an agent that is not healthy on the target in time, halts, and resumes after a spec change", func() {
		ns := "upgrade-rollback"
		d := startAgentDouble(ns)
		d.setBroken("2026.9.7", true)
		agents := upgradeAgents(ns, 2, "2026.9.5")
		clk := clocktesting.NewFakeClock(time.Now())
		passes := &passClock{PassiveClock: clk}
		DeferCleanup(startUpgradeManager(passes))
		createUpgrade("rollback", ns, "2026.9.7", func(eu *agentsv1.EngineUpgrade) {
			eu.Spec.WavePercent = 50
			eu.Spec.HealthTimeout = &metav1.Duration{Duration: time.Minute}
		})
		Eventually(func() string { return getAgent(agents[0]).Annotations[agentsv1.AnnotationUpgradeState] }).Should(Equal(agentsv1.AgentUpgradeUpgrading))
		Eventually(func() agentsv1.AgentPhase { return getAgent(agents[0]).Status.Phase }).Should(Equal(agentsv1.AgentNotRunning))
		// The pass that saw agent-a crash on the target waits for it (the clock stands still).
		Eventually(upgradeReadyMessage("rollback")).Should(ContainSubstring(
			"waiting for " + ns + "/agent-a: not yet healthy on engine 2026.9.7: phase not_running"))
		Expect(upgradeSummary("rollback")()).To(Equal([]any{agentsv1.UpgradeProgressing, int32(1), agentsv1.UpgradeCounts{Pending: 1, Upgrading: 1}}))

		clk.Step(61 * time.Second)
		pokeAgents(agents[:1])
		Eventually(upgradeSummary("rollback")).Should(Equal([]any{agentsv1.UpgradeHalted, int32(1), agentsv1.UpgradeCounts{Pending: 1, RolledBack: 1}}))
		got := getAgent(agents[0])
		snaps := upgradeSnapshots(agents[0])
		Expect(snaps).To(HaveLen(1))
		Expect(got.Spec.Engine.Version).To(Equal("2026.9.5"))
		Expect(got.Spec.DesiredSnapshot).To(Equal(snaps[0].Status.CID))
		Expect(got.Spec.RestoreRequestedAt).NotTo(BeNil())
		Expect(got.Annotations).To(HaveKeyWithValue(agentsv1.AnnotationUpgradeState, agentsv1.AgentUpgradeRolledBack))
		eu := getUpgrade("rollback")
		Expect(eu.Status.FailedAgents).To(Equal([]string{ns + "/agent-a"}))
		Expect(eu.Status.Waves[0].State).To(Equal(agentsv1.WaveFailed))
		Expect(eu.Status.Conditions).To(ContainElement(And(
			HaveField("Reason", agentsv1.ReasonUpgradeHalted), HaveField("Message", ContainSubstring(ns+"/agent-a")))))
		Eventually(eventReasons("EngineUpgrade", "rollback")).Should(ContainElements(agentsv1.EventRolledBack, agentsv1.EventHalted))
		Eventually(eventReasons("Agent", "agent-a")).Should(ContainElement(agentsv1.EventRolledBack))
		// Halted: the agent's restore is carried out, no further wave starts.
		Eventually(func() string { return getAgent(agents[0]).Status.SnapshotCID }).Should(Equal(snaps[0].Status.CID))
		passes.settle(agents)
		Expect(versionsOf(agents)()).To(Equal([]string{"2026.9.5", "2026.9.5"}))
		Expect(upgradeSummary("rollback")()).To(Equal([]any{agentsv1.UpgradeHalted, int32(1), agentsv1.UpgradeCounts{Pending: 1, RolledBack: 1}}))

		// The platform team fixes the release and resumes by pausing and unpausing.
		d.setBroken("2026.9.7", false)
		updateUpgrade("rollback", func(eu *agentsv1.EngineUpgrade) { eu.Spec.Paused = true })
		// Until a wave takes it again, the rolled-back agent counts as such.
		Eventually(upgradeSummary("rollback")).Should(Equal([]any{agentsv1.UpgradePaused, int32(1), agentsv1.UpgradeCounts{Pending: 1, RolledBack: 1}}))
		updateUpgrade("rollback", func(eu *agentsv1.EngineUpgrade) { eu.Spec.Paused = false })
		Eventually(upgradeSummary("rollback")).Should(Equal([]any{agentsv1.UpgradeSucceeded, int32(3), agentsv1.UpgradeCounts{Upgraded: 2}}))
		Expect(versionsOf(agents)()).To(Equal([]string{"2026.9.7", "2026.9.7"}))
		Expect(getUpgrade("rollback").Status.FailedAgents).To(BeEmpty())
	})

	It("halts without touching the version when an agent's snapshot fails", func() {
		ns := "upgrade-snapfail"
		d := startAgentDouble(ns)
		d.mu.Lock()
		d.failSnapshots = true
		d.mu.Unlock()
		agents := upgradeAgents(ns, 2, "2026.9.5")
		passes := &passClock{PassiveClock: clocktesting.NewFakeClock(time.Now())}
		DeferCleanup(startUpgradeManager(passes))
		createUpgrade("snapfail", ns, "2026.9.7", func(eu *agentsv1.EngineUpgrade) { eu.Spec.WavePercent = 50 })
		Eventually(upgradeSummary("snapfail")).Should(Equal([]any{agentsv1.UpgradeHalted, int32(1), agentsv1.UpgradeCounts{Pending: 2}}))
		Expect(getUpgrade("snapfail").Status.FailedAgents).To(Equal([]string{ns + "/agent-a"}))
		Expect(getAgent(agents[0]).Annotations).To(HaveKeyWithValue(agentsv1.AnnotationUpgradeState, agentsv1.AgentUpgradeFailed))
		passes.settle(agents)
		Expect(versionsOf(agents)()).To(Equal([]string{"2026.9.5", "2026.9.5"}))
		Expect(upgradeSummary("snapfail")()).To(Equal([]any{agentsv1.UpgradeHalted, int32(1), agentsv1.UpgradeCounts{Pending: 2}}))
	})

	It("says which agent a wave waits for and why, and halts on a snapshot that does not complete in time", func() {
		ns := "upgrade-snapstuck"
		d := startAgentDouble(ns)
		d.hold(true)
		agents := upgradeAgents(ns, 2, "2026.9.5")
		clk := clocktesting.NewFakeClock(time.Now())
		DeferCleanup(startUpgradeManager(clk))
		createUpgrade("snapstuck", ns, "2026.9.7", func(eu *agentsv1.EngineUpgrade) {
			eu.Spec.WavePercent, eu.Spec.HealthTimeout = 50, &metav1.Duration{Duration: time.Minute}
		})
		readyMessage := func() string {
			c := meta.FindStatusCondition(getUpgrade("snapstuck").Status.Conditions, agentsv1.ConditionReady)
			if c == nil {
				return ""
			}
			return c.Message
		}
		Eventually(readyMessage).Should(And(ContainSubstring("waiting for "+ns+"/agent-a: snapshot agent-a-upgrade-"), ContainSubstring("due by")))
		clk.Step(2 * time.Minute)
		pokeAgents(agents[:1])
		Eventually(upgradeSummary("snapstuck")).Should(Equal([]any{agentsv1.UpgradeHalted, int32(1), agentsv1.UpgradeCounts{Pending: 2}}))
		Expect(getUpgrade("snapstuck").Status.FailedAgents).To(Equal([]string{ns + "/agent-a"}))
		Expect(getAgent(agents[0]).Annotations).To(HaveKeyWithValue(agentsv1.AnnotationUpgradeState, agentsv1.AgentUpgradeFailed))
		Expect(versionsOf(agents)()).To(Equal([]string{"2026.9.5", "2026.9.5"}), "the version never changed")
		Eventually(eventReasons("Agent", "agent-a")).Should(ContainElement(agentsv1.EventHalted))
	})

	It("names the agent a wave waits for to be healthy", func() {
		ns := "upgrade-unhealthy"
		d := startAgentDouble(ns)
		d.setBroken("2026.9.7", true)
		upgradeAgents(ns, 2, "2026.9.5")
		DeferCleanup(startUpgradeManager(clocktesting.NewFakeClock(time.Now())))
		createUpgrade("unhealthy", ns, "2026.9.7", func(eu *agentsv1.EngineUpgrade) { eu.Spec.WavePercent = 50 })
		Eventually(func() string {
			c := meta.FindStatusCondition(getUpgrade("unhealthy").Status.Conditions, agentsv1.ConditionReady)
			if c == nil {
				return ""
			}
			return c.Message
		}).Should(ContainSubstring("waiting for " + ns + "/agent-a: not yet healthy on engine 2026.9.7: phase not_running, " + agentsv1.ReasonCrashed + ": exit 1 (due by "))
	})

	It("stops between waves while paused", func() {
		ns := "upgrade-paused"
		d := startAgentDouble(ns)
		agents := upgradeAgents(ns, 3, "2026.9.5")
		passes := &passClock{PassiveClock: clocktesting.NewFakeClock(time.Now())}
		DeferCleanup(startUpgradeManager(passes))
		createUpgrade("paused", ns, "2026.9.7", func(eu *agentsv1.EngineUpgrade) {
			eu.Spec.WavePercent = 33 // a third of three agents: one per wave
			eu.Spec.Paused = true
		})
		Eventually(upgradeSummary("paused")).Should(Equal([]any{agentsv1.UpgradePaused, int32(0), agentsv1.UpgradeCounts{Pending: 3}}))
		Expect(upgradeSnapshots(agents[0])).To(BeEmpty())

		// Paused during wave 1: the wave finishes, wave 2 does not start.
		d.hold(true)
		updateUpgrade("paused", func(eu *agentsv1.EngineUpgrade) { eu.Spec.Paused = false })
		Eventually(func() int { return len(upgradeSnapshots(agents[0])) }).Should(Equal(1))
		updateUpgrade("paused", func(eu *agentsv1.EngineUpgrade) { eu.Spec.Paused = true })
		d.hold(false)
		Eventually(upgradeSummary("paused")).Should(Equal([]any{agentsv1.UpgradePaused, int32(1), agentsv1.UpgradeCounts{Pending: 2, Upgraded: 1}}))
		passes.settle(agents)
		Expect(versionsOf(agents)()).To(Equal([]string{"2026.9.7", "2026.9.5", "2026.9.5"}))
		Expect(upgradeSummary("paused")()).To(Equal([]any{agentsv1.UpgradePaused, int32(1), agentsv1.UpgradeCounts{Pending: 2, Upgraded: 1}}))

		updateUpgrade("paused", func(eu *agentsv1.EngineUpgrade) { eu.Spec.Paused = false })
		Eventually(upgradeSummary("paused")).Should(Equal([]any{agentsv1.UpgradeSucceeded, int32(3), agentsv1.UpgradeCounts{Upgraded: 3}}))
	})

	It("resumes a wave from the agents' annotations after a manager restart", func() {
		ns := "upgrade-restart"
		d := startAgentDouble(ns)
		agents := upgradeAgents(ns, 2, "")
		d.hold(true)
		stop := startUpgradeManager(clocktesting.NewFakeClock(time.Now()))
		createUpgrade("restart", ns, "2026.9.7", func(eu *agentsv1.EngineUpgrade) { eu.Spec.WavePercent = 100 })
		Eventually(func() int { return len(upgradeSnapshots(agents[0])) + len(upgradeSnapshots(agents[1])) }).Should(Equal(2))
		stop()

		// The snapshots complete while no manager runs; a new one takes the wave on.
		d.hold(false)
		Eventually(func() agentsv1.SnapshotPhase { return upgradeSnapshots(agents[1])[0].Status.Phase }).Should(Equal(agentsv1.SnapshotCompleted))
		DeferCleanup(startUpgradeManager(clocktesting.NewFakeClock(time.Now())))
		Eventually(upgradeSummary("restart")).Should(Equal([]any{agentsv1.UpgradeSucceeded, int32(1), agentsv1.UpgradeCounts{Upgraded: 2}}))
		for _, a := range agents {
			Expect(upgradeSnapshots(a)).To(HaveLen(1)) // the same snapshot, not a second one
			got := getAgent(a)
			Expect(got.Spec.Engine.Version).To(Equal("2026.9.7"))
			// The agents named no version: a rollback would put them back on the default.
			Expect(got.Annotations).To(HaveKeyWithValue(agentsv1.AnnotationUpgradePreviousVersion, ""))
		}
	})

	It("reports a version the platform does not offer and touches no agent", func() {
		ns := "upgrade-invalid"
		startAgentDouble(ns)
		agents := upgradeAgents(ns, 1, "2026.9.5")
		DeferCleanup(startUpgradeManager(clocktesting.NewFakeClock(time.Now())))
		createUpgrade("invalid", ns, "2030.1.1")
		Eventually(func() []string {
			eu := getUpgrade("invalid")
			for _, c := range eu.Status.Conditions {
				if c.Type == agentsv1.ConditionReady {
					return []string{string(c.Status), c.Reason}
				}
			}
			return nil
		}).Should(Equal([]string{"False", agentsv1.ReasonInvalidVersion}))
		Expect(getAgent(agents[0]).Annotations).NotTo(HaveKey(agentsv1.AnnotationUpgradePolicy))
		Expect(upgradeSnapshots(agents[0])).To(BeEmpty())
	})

	It("is validated by the API server, with defaults", func() {
		eu := createUpgrade("defaults", "nowhere", "2026.9.7")
		got := getUpgrade(eu.Name)
		Expect(got.Spec.WavePercent).To(Equal(int32(25)))
		Expect(got.Spec.HealthTimeout).To(Equal(&metav1.Duration{Duration: 5 * time.Minute}))
		for name, mut := range map[string]func(*agentsv1.EngineUpgrade){
			"bad-version": func(eu *agentsv1.EngineUpgrade) { eu.Spec.Version = "latest" },
			"no-version":  func(eu *agentsv1.EngineUpgrade) { eu.Spec.Version = "" },
			"zero-wave":   func(eu *agentsv1.EngineUpgrade) { eu.Spec.WavePercent = -1 },
			"big-wave":    func(eu *agentsv1.EngineUpgrade) { eu.Spec.WavePercent = 101 },
			"short-timeout": func(eu *agentsv1.EngineUpgrade) {
				eu.Spec.HealthTimeout = &metav1.Duration{Duration: 100 * time.Millisecond}
			},
			"long-timeout": func(eu *agentsv1.EngineUpgrade) { eu.Spec.HealthTimeout = &metav1.Duration{Duration: 48 * time.Hour} },
			"a-name-that-is-far-too-long-to-label-the-snapshots-it-takes-of-agents": func(*agentsv1.EngineUpgrade) {},
		} {
			bad := &agentsv1.EngineUpgrade{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: agentsv1.EngineUpgradeSpec{Version: "2026.9.7", WavePercent: 10}}
			mut(bad)
			Expect(k8sClient.Create(ctx, bad)).NotTo(Succeed(), name)
		}

		// The sample is one the API server takes.
		raw, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "config", "samples", "11_engineupgrade.yaml"))
		Expect(err).NotTo(HaveOccurred())
		sample := &agentsv1.EngineUpgrade{}
		Expect(yaml.UnmarshalStrict(raw, sample)).To(Succeed())
		Expect(k8sClient.Create(ctx, sample, client.DryRunAll)).To(Succeed())
	})
})
