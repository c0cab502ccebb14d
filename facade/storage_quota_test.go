package facade_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"golang.org/x/sys/unix"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/platform"
	"github.com/agentplane/agentplane/internal/rules/auth"
	"github.com/agentplane/agentplane/internal/rules/workspacens"
)

// quotaWorkspace creates workspace name (owner "qa") with quotas q and returns an all-scopes
// token.
func quotaWorkspace(name string, q *agentsv1.StorageQuotas) string {
	ws := &agentsv1.Workspace{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: agentsv1.WorkspaceSpec{
			Plan: agentsv1.PlanFree, Quotas: q,
			Members: []agentsv1.WorkspaceMember{{UserID: "qa", Role: agentsv1.RoleOwner}},
		},
	}
	ExpectWithOffset(1, workspacens.EnsureWorkspace(ctx, k8sClient, ws)).To(Succeed())
	return token(name, "qa", "", auth.ScopeAll)
}

func storageQuota(maxBytes, maxObjects int64) *agentsv1.StorageQuota {
	return &agentsv1.StorageQuota{MaxBytes: resource.NewQuantity(maxBytes, resource.BinarySI), MaxObjects: ptr.To(maxObjects)}
}

// usage is workspace ws's count of kind: settled bytes, objects, and pending reservations.
func usage(ws string, kind agentsv1.StorageKind) [3]int64 {
	w := &agentsv1.Workspace{}
	ExpectWithOffset(1, k8sClient.Get(ctx, client.ObjectKey{Name: ws}, w)).To(Succeed())
	c := w.Status.Storage.Count(kind)
	return [3]int64{c.Bytes, c.Objects, int64(len(c.Pending))}
}

// uploadTo posts content as a private multipart file to the facade at url.
func uploadTo(url, tok, name string, content []byte) reply {
	return uploadAt(url, tok, "private", name, content, nil)
}

var _ = Describe("Storage quotas", func() {
	It("refuses the file that would exceed the files quota with 403 Storage quota exceeded, and deleting frees", func() {
		const ws = "quota-files"
		tok := quotaWorkspace(ws, &agentsv1.StorageQuotas{Files: storageQuota(1000, 10)})
		first := uploadTo(baseURL, tok, "a.bin", bytes.Repeat([]byte("a"), 300))
		Expect(first.Status).To(Equal(200), first.Raw)
		Expect(usage(ws, agentsv1.StorageFiles)).To(Equal([3]int64{300, 1, 0}))
		// The same bytes again: the same file, no more room held.
		again := uploadTo(baseURL, tok, "a.bin", bytes.Repeat([]byte("a"), 300))
		Expect(again.Status).To(Equal(200), again.Raw)
		Expect(dataOf(again)["id"]).To(Equal(dataOf(first)["id"]))
		Expect(usage(ws, agentsv1.StorageFiles)).To(Equal([3]int64{300, 1, 0}))

		over := uploadTo(baseURL, tok, "b.bin", bytes.Repeat([]byte("b"), 701))
		Expect(over.Status).To(Equal(403), over.Raw)
		code, msg := over.v3Error()
		Expect(code).To(BeEquivalentTo(403))
		Expect(msg).To(Equal("Storage quota exceeded"))
		Expect(usage(ws, agentsv1.StorageFiles)).To(Equal([3]int64{300, 1, 0}))
		var files agentsv1.FileList
		Expect(k8sClient.List(ctx, &files, client.InNamespace(ws))).To(Succeed())
		Expect(files.Items).To(HaveLen(1))

		Expect(uploadTo(baseURL, tok, "c.bin", bytes.Repeat([]byte("c"), 700)).Status).To(Equal(200))
		Expect(usage(ws, agentsv1.StorageFiles)).To(Equal([3]int64{1000, 2, 0}))

		// Deleting a file gives its room back at once.
		id := dataOf(first)["id"].(string)
		Expect(call("DELETE", "/v3/files/private/"+id, tok, nil).Status).To(Equal(200))
		Expect(usage(ws, agentsv1.StorageFiles)).To(Equal([3]int64{700, 1, 0}))
		Expect(uploadTo(baseURL, tok, "d.bin", bytes.Repeat([]byte("d"), 300)).Status).To(Equal(200))
		Expect(usage(ws, agentsv1.StorageFiles)).To(Equal([3]int64{1000, 2, 0}))
	})

	// race sends 20 distinct uploads of 100 bytes at once, half through each replica, and
	// returns how many of each status came back.
	race := func(tok string, urls ...string) map[int]int {
		var wg sync.WaitGroup
		results := make(chan reply, 20)
		for i := range 20 {
			wg.Add(1)
			go func() {
				defer GinkgoRecover()
				defer wg.Done()
				results <- uploadTo(urls[i%len(urls)], tok, fmt.Sprintf("racer-%d", i), []byte(fmt.Sprintf("racer %02d %s", i, bytes.Repeat([]byte("x"), 91))))
			}()
		}
		wg.Wait()
		close(results)
		count := map[int]int{}
		for r := range results {
			count[r.Status]++
			if r.Status == 403 {
				_, msg := r.v3Error()
				Expect(msg).To(Equal("Storage quota exceeded"))
			}
		}
		return count
	}

	It("accepts exactly N of 20 concurrent uploads on two facade replicas, against N files or N files' bytes", func() {
		const n = 5
		rctx, stop := context.WithCancel(ctx)
		DeferCleanup(stop)
		_, second := startPlatform(rctx, platform.Options{APIOnly: true})
		for ws, q := range map[string]*agentsv1.StorageQuota{
			"quota-race-objects": storageQuota(1<<30, n),
			"quota-race-bytes":   storageQuota(n*100, 1000),
		} {
			tok := quotaWorkspace(ws, &agentsv1.StorageQuotas{Files: q})
			Expect(race(tok, baseURL, second)).To(Equal(map[int]int{200: n, 403: 20 - n}), ws)
			var files agentsv1.FileList
			Expect(k8sClient.List(ctx, &files, client.InNamespace(ws))).To(Succeed())
			Expect(files.Items).To(HaveLen(n))
			Expect(usage(ws, agentsv1.StorageFiles)).To(Equal([3]int64{n * 100, n, 0}), ws)
		}
	})

	It("refuses an agent upload over the uploads quota, and a snapshot sync over the snapshot quota, with 403; an agent deleted gives its uploads back", func() {
		const ws = "quota-uploads"
		tok := quotaWorkspace(ws, &agentsv1.StorageQuotas{Uploads: storageQuota(10, 100), Snapshots: storageQuota(1<<30, 0)})
		id := snapAgent(baseURL, tok, "Uploader")
		up := func(name, content string) reply {
			return call("POST", "/v0/agents/"+id+"/files/upload", tok, map[string]any{
				"filename": name, "contentBase64": base64.StdEncoding.EncodeToString([]byte(content)),
			})
		}
		Expect(up("a.txt", "123456").Status).To(Equal(201))
		Expect(usage(ws, agentsv1.StorageUploads)).To(Equal([3]int64{6, 1, 0}))
		r := up("b.txt", "12345")
		Expect(r.Status).To(Equal(403), r.Raw)
		Expect(r.v0Error()).To(Equal("Storage quota exceeded"))
		Expect(usage(ws, agentsv1.StorageUploads)).To(Equal([3]int64{6, 1, 0}))
		Expect(up("c.txt", "1234").Status).To(Equal(201))
		Expect(usage(ws, agentsv1.StorageUploads)).To(Equal([3]int64{10, 2, 0}))
		a := &agentsv1.Agent{}
		Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ws, Name: id}, a)).To(Succeed())
		Expect(a.Annotations).To(HaveKeyWithValue(agentsv1.AnnotationUploads, "10,2"))

		// A snapshot over the snapshot quota (no snapshots at all here) fails with the same answer.
		sync := call("POST", "/v0/agents/"+id+"/snapshots/sync", tok, nil)
		Expect(sync.Status).To(Equal(403), sync.Raw)
		Expect(sync.v0Error()).To(Equal("Storage quota exceeded"))

		// The agent's deletion gives its uploads back.
		Expect(call("DELETE", "/v0/agents/"+id, tok, nil).Status).To(BeNumerically("<", 300))
		Eventually(func() [3]int64 { return usage(ws, agentsv1.StorageUploads) }).Should(Equal([3]int64{0, 0, 0}))
	})
})

// agentHome is the local runtime's home of the agent on this host: its own, or the warm
// gateway's it claimed (state.json's home).
func agentHome(agent string) string {
	GinkgoHelper()
	var st struct {
		Home string `json:"home"`
	}
	b, err := os.ReadFile(agentFile(agent, "state.json"))
	Expect(err).NotTo(HaveOccurred())
	Expect(json.Unmarshal(b, &st)).To(Succeed())
	if st.Home != "" {
		return st.Home
	}
	return agentFile(agent, "home")
}

var _ = Describe("A full agent home", func() {
	It("refuses an upload with 403 Storage quota exceeded, counting nothing, and takes it once there is room", func() {
		if ok, why := plat.HomeLimit(); !ok {
			if os.Getenv("CI") == "true" { // under CI every spec runs
				Fail("the local runtime bounds no home here: " + why)
			}
			Skip("the local runtime bounds no home here: " + why)
		}
		const ws = "quota-full-home"
		tok := quotaWorkspace(ws, nil)
		id := snapAgent(baseURL, tok, "Filler")
		up := func() reply {
			return call("POST", "/v0/agents/"+id+"/files/upload", tok, map[string]any{
				"filename": "notes.bin", "contentBase64": base64.StdEncoding.EncodeToString(bytes.Repeat([]byte("n"), 1<<20)),
			})
		}
		// What the agent itself would do with `fallocate`: take all but 256 KiB of its home.
		home := agentHome(id)
		var fs unix.Statfs_t
		Expect(unix.Statfs(home, &fs)).To(Succeed())
		fill, err := os.Create(filepath.Join(home, "fill"))
		Expect(err).NotTo(HaveOccurred())
		Expect(unix.Fallocate(int(fill.Fd()), 0, 0, int64(fs.Bavail)*fs.Bsize-256<<10)).To(Succeed())
		Expect(fill.Close()).To(Succeed())

		r := up()
		Expect(r.Status).To(Equal(403), r.Raw)
		Expect(r.v0Error()).To(Equal("Storage quota exceeded"))
		Expect(usage(ws, agentsv1.StorageUploads)).To(Equal([3]int64{0, 0, 0}))
		_, err = os.Stat(filepath.Join(home, ".openclaw", "workspace", "notes.bin"))
		Expect(os.IsNotExist(err)).To(BeTrue(), "the refused upload left %v", err)

		Expect(os.Remove(filepath.Join(home, "fill"))).To(Succeed())
		r = up()
		Expect(r.Status).To(Equal(201), r.Raw)
		Expect(usage(ws, agentsv1.StorageUploads)).To(Equal([3]int64{1 << 20, 1, 0}))
	})
})
