package modelproxy

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// The relay is full duplex: the provider's answer may begin while the request body is still
// coming, and the rest of the body still reaches the provider. Without EnableFullDuplex an
// HTTP/1 server drains and closes the request body when the answer's header is written: here
// that drain waits for a body the client sends only after the first event (the test times
// out); under load it made the transport's last read of the body fail, and the transport then
// closed the provider connection under a streaming answer (replies cut off mid-body: "use of
// closed network connection", in about one benchmark round in three before the fix).
func TestRelayIsFullDuplex(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = http.NewResponseController(w).EnableFullDuplex() // answers while the body comes
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "event: message_start\n\n")
		http.NewResponseController(w).Flush()
		b, err := io.ReadAll(r.Body)
		fmt.Fprintf(w, "data: got %d bytes (%v)\n\n", len(b), err)
	}))
	t.Cleanup(func() { up.CloseClientConnections(); up.Close() })
	p, err := New(Options{Authorizer: &fakeAuth{grants: map[string]Grant{agentCred: {Agent: "ns1/a", Workspace: "ns1", Key: []byte(realKey)}}},
		Upstreams: map[string]string{"anthropic": up.URL}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(p)
	t.Cleanup(func() {
		srv.CloseClientConnections()
		srv.Close()
		p.CloseIdleConnections()
	})

	// A raw connection: the body's second half is sent only once the answer has begun.
	first, second := strings.Repeat("a", 1000), strings.Repeat("b", 1000)
	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	fmt.Fprintf(conn, "POST /llm/anthropic/v1/messages HTTP/1.1\r\nHost: proxy\r\nX-Api-Key: %s\r\nContent-Length: %d\r\n\r\n%s",
		agentCred, len(first)+len(second), first)
	res, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no answer while the body was still coming: %v", err)
	}
	defer res.Body.Close()
	rd := bufio.NewReader(res.Body)
	if line, err := rd.ReadString('\n'); err != nil || line != "event: message_start\n" {
		t.Fatalf("first event: %q %v", line, err)
	}
	if _, err := io.WriteString(conn, second); err != nil {
		t.Fatal(err)
	}
	rest, err := io.ReadAll(rd)
	if err != nil {
		t.Fatalf("the answer was cut off: %v (read %q)", err, rest)
	}
	if !strings.Contains(string(rest), "data: got 2000 bytes (<nil>)") {
		t.Fatalf("the provider did not get the whole body: %q", rest)
	}
}
