package facade_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/facade"
	"github.com/agentplane/agentplane/internal/rules/auth"
)

// sseStream is a followed log: every line of the event stream, as read.
type sseStream struct {
	mu    sync.Mutex
	lines []string
	ended chan struct{} // closed when the stream ended
}

func (s *sseStream) all() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.lines...)
}

// followLogs opens GET <url>/v0/agents/<agent>/logs?follow=true<query> and reads it in the
// background until ctx ends or the server closes it.
func followLogs(ctx context.Context, url, tok, agent, query string) *sseStream {
	GinkgoHelper()
	req, err := http.NewRequestWithContext(ctx, "GET", url+"/v0/agents/"+agent+"/logs?follow=true"+query, nil)
	Expect(err).NotTo(HaveOccurred())
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := http.DefaultClient.Do(req)
	Expect(err).NotTo(HaveOccurred())
	Expect(resp.StatusCode).To(Equal(200))
	Expect(resp.Header.Get("Content-Type")).To(Equal("text/event-stream"))
	s := &sseStream{ended: make(chan struct{})}
	go func() {
		defer close(s.ended)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			if sc.Text() == "" {
				continue
			}
			s.mu.Lock()
			s.lines = append(s.lines, sc.Text())
			s.mu.Unlock()
		}
	}()
	return s
}

// logLines is the lines of GET .../logs?<query>.
func logLines(tok, agent, query string) []string {
	GinkgoHelper()
	r := call("GET", "/v0/agents/"+agent+"/logs?"+query, tok, nil)
	Expect(r.Status).To(Equal(200), r.Raw)
	var out []string
	for _, l := range r.Body["lines"].([]any) {
		out = append(out, l.(string))
	}
	return out
}

// smallBuffers is a listener whose connections have tiny send buffers, so that a client that
// does not read blocks the server's writes after a few kilobytes.
type smallBuffers struct{ net.Listener }

func (l smallBuffers) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetWriteBuffer(4096)
	}
	return c, err
}

var _ = Describe("Gateway logs", Ordered, func() {
	const ws = "logs-a"
	var tok, agent string
	// gatewayLog appends lines to the agent's gateway log, as its gateway would.
	gatewayLog := func(lines ...string) {
		GinkgoHelper()
		appendGatewayLog(agent, lines...)
	}

	BeforeAll(func() {
		workspace(ws, agentsv1.PlanPro, agentsv1.WorkspaceMember{UserID: "lou", Role: agentsv1.RoleOwner})
		tok = token(ws, "lou", "", auth.ScopeAll)
		agent = newAgentIn(tok, "Logger")
	})

	It("answers the last lines the gateway wrote, oldest first", func() {
		Expect(strings.Join(logLines(tok, agent, ""), "\n")).To(ContainSubstring("listening on"))
		gatewayLog("first", "second", "third", "fourth", "fifth")
		Expect(logLines(tok, agent, "tail=3")).To(Equal([]string{"third", "fourth", "fifth"}))
	})

	It("refuses a tail that is not an integer from 1 to 5000", func() {
		for _, q := range []string{"tail=0", "tail=abc", "tail=5001", "tail=-1", "tail=", "follow=true&tail=0"} {
			r := call("GET", "/v0/agents/"+agent+"/logs?"+q, tok, nil)
			Expect(r.Status).To(Equal(400), q)
			Expect(r.v0Error()).To(Equal("Invalid tail"), q)
		}
	})

	It("answers Agent not found for another workspace's agent", func() {
		workspace("logs-b", agentsv1.PlanPro, agentsv1.WorkspaceMember{UserID: "lee", Role: agentsv1.RoleOwner})
		other := token("logs-b", "lee", "", auth.ScopeAll)
		for _, q := range []string{"", "?follow=true"} {
			r := call("GET", "/v0/agents/"+agent+"/logs"+q, other, nil)
			Expect(r.Status).To(Equal(404), r.Raw)
			Expect(r.v0Error()).To(Equal("Agent not found"))
		}
		r := call("GET", "/v0/agents/"+agent+"/logs", token(ws, "lou", "", auth.ScopeFilesRead), nil)
		Expect(r.Status).To(Equal(403), r.Raw)
	})

	It("redacts the gateway token and the attached secrets' values", func() {
		value := fmt.Sprintf("hunter2-%d", GinkgoRandomSeed()) // too short to look like a token
		sec := call("POST", "/v0/secrets", tok, map[string]string{"name": "LOGS_PASSPHRASE", "value": value})
		Expect(sec.Status).To(Equal(201), sec.Raw)
		Expect(call("POST", "/v0/agents/"+agent+"/secrets", tok, map[string]any{"secretIds": []string{secretID(sec)}}).Status).To(Equal(200))
		gw := call("GET", "/v0/agents/"+agent+"/gateway-token", tok, nil)
		Expect(gw.Status).To(Equal(200), gw.Raw)
		gwToken := gw.Body["token"].(string)
		// The attach restarts the gateway with the secret; wait until the new one has started
		// (the fake engine writes "[gateway] ready" last), so that the log is quiet for the next
		// specs.
		Eventually(func() string { return gatewayEnv(tok, agent, "LOGS_PASSPHRASE") }).Should(Equal(value))
		Eventually(func() string { return strings.Join(logLines(tok, agent, "tail=1"), "") }).Should(ContainSubstring("[gateway] ready"))

		gatewayLog("the passphrase is "+value+" today", "connected with "+gwToken, "Authorization: Bearer abc.def.ghi")
		for _, lines := range [][]string{logLines(tok, agent, "tail=50"), nil} {
			if lines == nil { // and the same when followed
				fctx, stop := context.WithCancel(ctx)
				s := followLogs(fctx, baseURL, tok, agent, "&tail=50")
				Eventually(func() string { return strings.Join(s.all(), "\n") }).Should(ContainSubstring("Authorization: Bearer [REDACTED]"))
				stop()
				<-s.ended
				lines = s.all()
			}
			all := strings.Join(lines, "\n")
			Expect(all).NotTo(ContainSubstring(value))
			Expect(all).NotTo(ContainSubstring(gwToken))
			Expect(all).NotTo(ContainSubstring("abc.def.ghi"))
			Expect(all).To(ContainSubstring("the passphrase is [REDACTED] today"))
			Expect(all).To(ContainSubstring("connected with [REDACTED]"))
		}
	})

	It("follows: the tail, then new lines, until the client leaves", func() {
		gatewayLog("before the stream")
		fctx, stop := context.WithCancel(ctx)
		defer stop()
		s := followLogs(fctx, baseURL, tok, agent, "&tail=1")
		Eventually(s.all).Should(Equal([]string{"data: before the stream"}))
		Expect(plat.API.Followers()).To(BeEquivalentTo(1))

		gatewayLog("after the stream started")
		Eventually(s.all).Should(Equal([]string{"data: before the stream", "data: after the stream started"}))

		stop()
		<-s.ended
		// The server's follower (and the runtime's reader behind it) is gone.
		Eventually(plat.API.Followers).Should(BeZero())
	})

	It("cuts off a follower that does not read, while a reading one keeps receiving", func() {
		opts := plat.API.OptionsForTest()
		opts.Logs = facade.LogOptions{Buffer: 16, SlowAfter: 2 * time.Second}
		api := facade.New(opts)
		l, err := net.Listen("tcp", "127.0.0.1:0")
		Expect(err).NotTo(HaveOccurred())
		srv := &httptest.Server{Listener: smallBuffers{l}, Config: &http.Server{Handler: api}}
		srv.Start()
		DeferCleanup(srv.Close)

		// The slow follower: a connection with a tiny receive buffer that is never read.
		d := net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
			return c.Control(func(fd uintptr) { _ = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
		}}
		slow, err := d.DialContext(ctx, "tcp", l.Addr().String())
		Expect(err).NotTo(HaveOccurred())
		defer slow.Close()
		_, err = fmt.Fprintf(slow, "GET /v0/agents/%s/logs?follow=true&tail=1 HTTP/1.1\r\nHost: logs\r\nAuthorization: Bearer %s\r\n\r\n", agent, tok)
		Expect(err).NotTo(HaveOccurred())
		Eventually(api.Followers).Should(BeEquivalentTo(1))

		fctx, stop := context.WithCancel(ctx)
		defer stop()
		normal := followLogs(fctx, srv.URL, tok, agent, "&tail=1")
		Eventually(api.Followers).Should(BeEquivalentTo(2))

		// Far more than the socket buffers and the 16 waiting lines hold.
		flood := make([]string, 5000)
		for i := range flood {
			flood[i] = "flood line with padding text so that the stream carries a lot " + strconv.Itoa(i+1)
		}
		appendGatewayLog(agent, flood...)
		Eventually(api.Followers).Should(BeEquivalentTo(1)) // the slow one is cut off
		// Its connection is closed: reading what the buffers held ends.
		_ = slow.SetReadDeadline(time.Now().Add(30 * time.Second))
		_, err = io.Copy(io.Discard, slow)
		Expect(err == nil || errors.Is(err, syscall.ECONNRESET)).To(BeTrue(), "%v", err)

		gatewayLog("after the flood")
		Eventually(func() []string { return normal.all() }).Should(ContainElement("data: after the flood"))
		Expect(normal.all()).To(ContainElement("data: flood line with padding text so that the stream carries a lot 5000"))
		Expect(normal.all()).NotTo(ContainElement("event: error"))
		stop()
		<-normal.ended
		Eventually(api.Followers).Should(BeZero())
	})

	It("reads a suspended agent's logs without waking it", func() {
		Expect(call("POST", "/v0/agents/"+agent+"/suspend", tok, nil).Status).To(Equal(200))
		Expect(logLines(tok, agent, "tail=5000")).To(ContainElement("after the flood"))
		// A route that wakes an agent asks for it (spec.wakeRequestedAt) before it answers; and a
		// pass of the controller that began after the read keeps the agent asleep.
		a := &agentsv1.Agent{}
		Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ws, Name: agent}, a)).To(Succeed())
		Expect(a.Spec.WakeRequestedAt).To(BeNil(), "the read asked for a wake")
		agentPassed(ws, agent)
		Expect(agentOf(call("GET", "/v0/agents/"+agent, tok, nil))["status"]).To(Equal("suspended"))
	})

	It("ends the stream with an end event when the agent is deleted", func() {
		fctx, stop := context.WithCancel(ctx)
		defer stop()
		s := followLogs(fctx, baseURL, tok, agent, "&tail=1")
		Eventually(s.all).ShouldNot(BeEmpty())
		Expect(call("DELETE", "/v0/agents/"+agent, tok, nil).Status).To(Equal(200))
		Eventually(s.ended).Should(BeClosed())
		lines := s.all()
		Expect(lines[len(lines)-2:]).To(Equal([]string{"event: end", "data: agent deleted"}))
		Eventually(plat.API.Followers).Should(BeZero())
	})
})
