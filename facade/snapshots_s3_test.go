package facade_test

import (
	"bytes"
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/minio/minio-go/v7"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/agentplane/agentplane/internal/adapters/storage/s3"
	"github.com/agentplane/agentplane/internal/devtools/testenv"
	"github.com/agentplane/agentplane/internal/platform"
)

// versitygw is an S3-compatible server (hack/build-s3server.sh builds it; AGENTPLANE_S3SERVER
// may name a binary) with its posix backend in a directory that outlives restarts.
type versitygw struct {
	bin, addr, data string
	cmd             *exec.Cmd
	done            chan struct{}
	log             *bytes.Buffer
}

const (
	s3Access = "agentplane-test"
	s3Secret = "agentplane-test-secret"
	s3Bucket = "snapshots-test"
)

// startVersitygw builds (if needed) and starts the server on a free loopback port.
func startVersitygw() *versitygw {
	bin := os.Getenv("AGENTPLANE_S3SERVER")
	if bin == "" {
		out, err := exec.Command("bash", filepath.Join(testenv.RepoRoot(), "hack", "build-s3server.sh")).Output()
		Expect(err).NotTo(HaveOccurred(), "hack/build-s3server.sh must build the S3 test server")
		bin = strings.TrimSpace(string(out))
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	Expect(err).NotTo(HaveOccurred())
	addr := l.Addr().String()
	Expect(l.Close()).To(Succeed())
	v := &versitygw{bin: bin, addr: addr, data: GinkgoT().TempDir()}
	v.start()
	return v
}

func (v *versitygw) start() {
	v.log = &bytes.Buffer{}
	v.cmd = exec.Command(v.bin, "--port", v.addr, "--quiet", "posix", v.data)
	v.cmd.Env = append(os.Environ(), "ROOT_ACCESS_KEY="+s3Access, "ROOT_SECRET_KEY="+s3Secret)
	v.cmd.Stdout, v.cmd.Stderr = v.log, v.log
	v.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	Expect(v.cmd.Start()).To(Succeed())
	v.done = make(chan struct{})
	go func(cmd *exec.Cmd, done chan struct{}) { _ = cmd.Wait(); close(done) }(v.cmd, v.done)
	Eventually(func() error {
		c, err := net.DialTimeout("tcp", v.addr, 200*time.Millisecond)
		if err == nil {
			_ = c.Close()
		}
		return err
	}).Should(Succeed(), "versitygw did not listen")
}

// stop terminates the server (its process group) and waits for it.
func (v *versitygw) stop() {
	if v.cmd == nil {
		return
	}
	_ = syscall.Kill(-v.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-v.done:
	case <-time.After(10 * time.Second):
		_ = syscall.Kill(-v.cmd.Process.Pid, syscall.SIGKILL)
		<-v.done
	}
	v.cmd = nil
}

// The whole platform (facade replicas and controllers) stores snapshots in S3 here: the
// controllers through the main platform's switchable store, and an API-only facade whose
// storage is the S3 store itself.
var _ = Describe("Snapshots on S3", Ordered, func() {
	var (
		srv    *versitygw
		store  *s3.Store
		s3URL  string
		tok    string
		stopS3 context.CancelFunc
	)

	BeforeAll(func() {
		srv = startVersitygw()
		DeferCleanup(srv.stop)
		var err error
		store, err = s3.New(s3.Config{
			Endpoint: srv.addr, Bucket: s3Bucket, AccessKey: s3Access, SecretKey: s3Secret, PathStyle: true,
			Prefix: "agentplane", TempDir: GinkgoT().TempDir(), DialTimeout: time.Second, ResponseTimeout: 5 * time.Second,
			OpTimeout: 5 * time.Second, Retries: -1,
		})
		Expect(err).NotTo(HaveOccurred())
		Expect(store.Client().MakeBucket(ctx, s3Bucket, minio.MakeBucketOptions{})).To(Succeed())
		DeferCleanup(mainFiles.use(store))
		var fctx context.Context
		fctx, stopS3 = context.WithCancel(ctx)
		DeferCleanup(func() { stopS3() })
		_, s3URL = startPlatform(fctx, platform.Options{APIOnly: true, Files: store})
		tok = snapshotWorkspace("snaps-s3")
	})

	It("syncs into the bucket, lists and resets through an API-only facade", func() {
		id := snapAgent(baseURL, tok, "On S3")
		execOK(baseURL, tok, id, `mkdir -p data && head -c 700000 /dev/urandom > data/blob && printf 'v1\n' > v.txt`)
		tree1 := execOK(baseURL, tok, id, treeCommand)
		first := syncOK(s3URL, tok, id)
		cid1 := first["cid"].(string)
		info, err := store.Client().StatObject(ctx, s3Bucket, "agentplane/snaps-s3/snapshots/"+cid1, minio.StatObjectOptions{})
		Expect(err).NotTo(HaveOccurred(), "the archive is an object of the bucket")
		Expect(info.Size).To(BeEquivalentTo(first["size"]))

		execOK(baseURL, tok, id, `printf 'v2\n' > v.txt && rm data/blob`)
		cid2 := syncOK(s3URL, tok, id)["cid"].(string)
		Expect(historyCIDs(s3URL, tok, id)).To(Equal([]string{cid2, cid1}))
		resetOK(s3URL, tok, id, cid1)
		Expect(execOK(baseURL, tok, id, treeCommand)).To(Equal(tree1))
	})

	It("answers 503 while the S3 server is down and works again, history intact, once it is back", func() {
		id := snapAgent(baseURL, tok, "S3 outage")
		execOK(baseURL, tok, id, `printf 'before\n' > f.txt`)
		tree := execOK(baseURL, tok, id, treeCommand)
		cid := syncOK(s3URL, tok, id)["cid"].(string)

		srv.stop()
		for _, r := range []reply{
			callURL(s3URL, "POST", "/v0/agents/"+id+"/snapshots/sync", tok, nil),
			callURL(s3URL, "GET", "/v0/agents/"+id+"/snapshots", tok, nil),
			callURL(s3URL, "POST", "/v0/agents/"+id+"/snapshots/reset", tok, map[string]string{"snapshotCid": cid}),
		} {
			Expect(r.Status).To(Equal(503), r.Raw)
		}

		srv.start()
		Expect(historyCIDs(s3URL, tok, id)).To(Equal([]string{cid}))
		execOK(baseURL, tok, id, `printf 'after\n' > f.txt`)
		cid2 := syncOK(s3URL, tok, id)["cid"].(string)
		Expect(cid2).NotTo(Equal(cid))
		Expect(historyCIDs(s3URL, tok, id)).To(Equal([]string{cid2, cid}))
		resetOK(s3URL, tok, id, cid)
		Expect(execOK(baseURL, tok, id, treeCommand)).To(Equal(tree))
	})
})
