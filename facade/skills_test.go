package facade_test

import (
	"bytes"
	"crypto/rand"
	"fmt"
	"io/fs"
	"net/http/httptest"
	"strings"
	"sync"

	"github.com/agentplane/agentplane/internal/adapters/storage"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/adapters/cid"
	"github.com/agentplane/agentplane/internal/adapters/clawhub/clawhubtest"
	"github.com/agentplane/agentplane/internal/adapters/storage/local"
	"github.com/agentplane/agentplane/internal/platform"
	"github.com/agentplane/agentplane/internal/rules/auth"
)

var (
	hubOnce sync.Once
	hub     *clawhubtest.Registry
)

// hubURL starts the suite's ClawHub test registry (once) and returns its URL; the suite's
// platform installs skills from it.
func hubURL() string {
	hubOnce.Do(func() { hub = clawhubtest.NewRegistry() })
	return hub.URL
}

// publish builds a bundle of slug@version (SKILL.md and notes/version.txt inside a top-level
// directory, as registries often pack them), publishes it as the latest version and returns
// the zip.
func publish(slug, version string) []byte {
	hubURL()
	dir := slug + "-" + version + "/"
	z := clawhubtest.Files(dir+"SKILL.md", clawhubtest.SkillMD(slug, "version "+version), dir+"notes/version.txt", version)
	hub.Add(slug, "Skill "+slug, version, z)
	return z
}

// cidOf is the CID of a bundle, computed like storage does.
func cidOf(z []byte) string {
	c, _, err := cid.Compute(bytes.NewReader(z))
	Expect(err).NotTo(HaveOccurred())
	return c.String()
}

func skillOf(r reply) map[string]any {
	s, _ := r.Body["skill"].(map[string]any)
	return s
}

// installAt installs slug through the facade at url.
func installAt(url, tok, slug string, body any) reply {
	return callURL(url, "POST", "/v0/clawhub/"+slug+"/install", tok, body)
}

var _ = Describe("Skills: install from ClawHub", Ordered, func() {
	const ws = "skills-install"
	var tok string

	BeforeAll(func() {
		workspace(ws, agentsv1.PlanFree, agentsv1.WorkspaceMember{UserID: "sam", Role: agentsv1.RoleOwner},
			agentsv1.WorkspaceMember{UserID: "val", Role: agentsv1.RoleViewer})
		tok = token(ws, "sam", "", auth.ScopeAll)
	})

	It("installs a skill as a Skill object that carries the bundle's CID", func() {
		v1 := publish("weather", "1.0.0")
		r := installAt(baseURL, tok, "weather", nil)
		Expect(r.Status).To(Equal(201), r.Raw)
		sk := skillOf(r)
		Expect(sk).To(HaveKeyWithValue("id", "weather"))
		Expect(sk).To(HaveKeyWithValue("slug", "weather"))
		Expect(sk).To(HaveKeyWithValue("version", "1.0.0"))
		Expect(sk).To(HaveKeyWithValue("cid", cidOf(v1)))
		Expect(sk).To(HaveKeyWithValue("displayName", "Skill weather"))
		Expect(sk).To(HaveKey("installedAt"))

		obj := &agentsv1.Skill{}
		Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ws, Name: "weather"}, obj)).To(Succeed())
		Expect(obj.Spec).To(Equal(agentsv1.SkillSpec{
			Slug: "weather", Version: "1.0.0", CID: cidOf(v1), Registry: hubURL(), DisplayName: "Skill weather",
		}))
		Expect(sk).To(HaveKeyWithValue("size", BeEquivalentTo(len(v1))))
		By("the Skill controller records the stored bundle's size and Ready")
		Eventually(func(g Gomega) {
			g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(obj), obj)).To(Succeed())
			g.Expect(obj.Status.Size).To(Equal(int64(len(v1))))
			g.Expect(meta.IsStatusConditionTrue(obj.Status.Conditions, agentsv1.ConditionReady)).To(BeTrue())
		}).Should(Succeed())

		By("installing the same version again: 200 with it, nothing downloaded")
		downloads := hub.Downloads.Load()
		again := installAt(baseURL, tok, "weather", map[string]string{"version": "1.0.0"})
		Expect(again.Status).To(Equal(200), again.Raw)
		Expect(skillOf(again)).To(HaveKeyWithValue("cid", cidOf(v1)))
		Expect(hub.Downloads.Load()).To(Equal(downloads))

		By("installing without a version once a newer one is published: the Skill moves to it")
		v2 := publish("weather", "1.1.0")
		up := installAt(baseURL, tok, "weather", "")
		Expect(up.Status).To(Equal(200), up.Raw)
		Expect(skillOf(up)).To(HaveKeyWithValue("version", "1.1.0"))
		Expect(skillOf(up)).To(HaveKeyWithValue("cid", cidOf(v2)))
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(obj), obj)).To(Succeed())
		Expect(obj.Spec.CID).To(Equal(cidOf(v2)))
		Expect((obj).CIDs()).To(Equal([]string{cidOf(v2), cidOf(v1)}))

		By("listing the workspace's skills")
		publish("alpha", "0.1.0")
		Expect(installAt(baseURL, tok, "alpha", nil).Status).To(Equal(201))
		list := call("GET", "/v0/skills", tok, nil)
		Expect(list.Status).To(Equal(200), list.Raw)
		Expect(list.Body["skills"]).To(HaveLen(2))
		Expect(list.Body["skills"].([]any)[0]).To(HaveKeyWithValue("slug", "alpha"))
		Expect(list.Body["skills"].([]any)[1]).To(HaveKeyWithValue("version", "1.1.0"))
	})

	It("answers 404 for an unknown slug or version and 400 for a malformed one", func() {
		r := installAt(baseURL, tok, "no-such-skill", nil)
		Expect(r.Status).To(Equal(404), r.Raw)
		Expect(r.v0Error()).To(Equal("Skill not found"))
		publish("versioned", "1.0.0")
		r = installAt(baseURL, tok, "versioned", map[string]string{"version": "9.9.9"})
		Expect(r.Status).To(Equal(404), r.Raw)
		Expect(r.v0Error()).To(Equal("Skill not found"))
		Expect(installAt(baseURL, tok, "Bad.Slug", nil).v0Error()).To(Equal("Invalid slug"))
		Expect(installAt(baseURL, tok, "versioned", map[string]string{"version": "1.0; rm"}).v0Error()).To(Equal("Invalid version"))
		Expect(installAt(baseURL, tok, "versioned", "{").Status).To(Equal(400))
	})

	It("needs skills:write and a role that may write", func() {
		publish("scoped", "1.0.0")
		readOnly := token(ws, "sam", "", auth.ScopeAgentsRead)
		Expect(installAt(baseURL, readOnly, "scoped", nil).Status).To(Equal(403))
		Expect(call("GET", "/v0/skills", readOnly, nil).Status).To(Equal(200))
		viewer := token(ws, "val", "", auth.ScopeAll)
		Expect(installAt(baseURL, viewer, "scoped", nil).Status).To(Equal(403))
		Expect(installAt(baseURL, "", "scoped", nil).Status).To(Equal(401))
	})

	It("answers 503 when the registry is down or failing", func() {
		closed := httptest.NewServer(nil)
		closedURL := closed.URL
		closed.Close()
		_, down := startPlatform(ctx, platform.Options{APIOnly: true, ClawHubURL: closedURL})
		r := installAt(down, tok, "weather", nil)
		Expect(r.Status).To(Equal(503), r.Raw)
		Expect(r.v0Error()).To(Equal("Skill registry unavailable"))

		publish("flaky", "1.0.0")
		hub.FailWith(502)
		defer hub.FailWith(0)
		r = installAt(baseURL, tok, "flaky", nil)
		Expect(r.Status).To(Equal(503), r.Raw)
		Expect(r.v0Error()).To(Equal("Skill registry unavailable"))
	})

	It("refuses unsafe bundles with 422 and stores nothing", func() {
		store, err := local.New(GinkgoT().TempDir())
		Expect(err).NotTo(HaveOccurred())
		_, url := startPlatform(ctx, platform.Options{APIOnly: true, Files: store, ClawHubURL: hubURL()})
		skill := clawhubtest.Entry{Name: "SKILL.md", Body: "# evil"}
		random := make([]byte, 21<<20)
		_, _ = rand.Read(random)
		cases := map[string][]byte{
			"evil-slip":     clawhubtest.Zip(skill, clawhubtest.Entry{Name: "../../.openclaw/openclaw.json", Body: "{}"}),
			"evil-abs":      clawhubtest.Zip(skill, clawhubtest.Entry{Name: "/etc/cron.d/x", Body: "x"}),
			"evil-symlink":  clawhubtest.Zip(skill, clawhubtest.Entry{Name: "key", Body: "/root/.ssh/id_rsa", Mode: fs.ModeSymlink | 0o777}),
			"evil-bomb":     clawhubtest.Files("SKILL.md", "# x", "zeros", strings.Repeat("\x00", 60<<20)),
			"evil-noskill":  clawhubtest.Files("README.md", "no skill here"),
			"evil-notzip":   []byte("this is not a zip"),
			"evil-too-big":  clawhubtest.Zip(skill, clawhubtest.Entry{Name: "blob", Body: string(random)}),
			"evil-two-dirs": clawhubtest.Files("a/SKILL.md", "# a", "b/SKILL.md", "# b"),
		}
		for slug, z := range cases {
			hub.Add(slug, "", "1.0.0", z)
			r := installAt(url, tok, slug, nil)
			Expect(r.Status).To(Equal(422), "%s: %s", slug, r.Raw)
			if slug == "evil-too-big" {
				Expect(r.v0Error()).To(Equal("Skill bundle too large"))
			} else {
				Expect(r.v0Error()).To(HavePrefix("Invalid skill bundle: "), slug)
			}
			Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ws, Name: slug}, &agentsv1.Skill{})).NotTo(Succeed(), slug)
		}
		objs, err := store.List(ctx, storage.SkillsSpace(ws))
		Expect(err).NotTo(HaveOccurred())
		Expect(objs).To(BeEmpty())

		By("a sound bundle through the same facade is stored under its CID")
		good := publish("sound", "1.0.0")
		Expect(installAt(url, tok, "sound", nil).Status).To(Equal(201))
		objs, err = store.List(ctx, storage.SkillsSpace(ws))
		Expect(err).NotTo(HaveOccurred())
		Expect(objs).To(HaveLen(1))
		Expect(objs[0].CID).To(Equal(cidOf(good)))
	})

	It("names Skills of slugs that are not object names", func() {
		publish("under_score", "1.0.0")
		r := installAt(baseURL, tok, "under_score", nil)
		Expect(r.Status).To(Equal(201), r.Raw)
		Expect(skillOf(r)["id"]).To(HavePrefix("sk-under-score-"))
		Expect(installAt(baseURL, tok, "under_score", nil).Status).To(Equal(200))
	})
})

// skillCIDs lists the CIDs of skills answers.
func skillCIDs(rs ...reply) []string {
	var out []string
	for _, r := range rs {
		out = append(out, fmt.Sprint(skillOf(r)["cid"]))
	}
	return out
}
