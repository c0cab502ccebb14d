package modelproxy

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/goleak"

	"github.com/agentplane/agentplane/internal/devtools/testenv"
)

// TestConcurrentStreams relays 200 SSE streams at once, each 512 KiB, and measures the live
// heap while every stream is open and half way through: a relay that buffered answers would
// hold 100 MiB. Every goroutine is gone once servers and idle connections are closed.
func TestConcurrentStreams(t *testing.T) {
	if testing.Short() {
		testenv.Skip(t, "-short: 200 streams")
	}
	const streams, events, eventSize = 200, 128, 4 << 10
	defer goleak.VerifyNone(t)
	half := make(chan struct{})
	payload := "event: content_block_delta\ndata: {\"delta\":{\"text\":\"" + strings.Repeat("y", eventSize-60) + "\"}}\n\n"
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fl := w.(http.Flusher)
		io.WriteString(w, "event: message_start\ndata: {\"message\":{\"usage\":{\"input_tokens\":25,\"output_tokens\":1}}}\n\n")
		for i := range events {
			if i == events/2 {
				io.WriteString(w, "event: half\ndata: {}\n\n")
				fl.Flush()
				select {
				case <-half:
				case <-r.Context().Done():
					return
				}
			}
			if _, err := io.WriteString(w, payload); err != nil {
				return
			}
		}
		io.WriteString(w, "event: message_delta\ndata: {\"usage\":{\"output_tokens\":15}}\n\nevent: message_stop\ndata: {}\n\n")
	}))
	auth := &fakeAuth{grants: map[string]Grant{}}
	for i := range streams {
		auth.grants[fmt.Sprint("cred-", i)] = Grant{Agent: fmt.Sprint("ns/a", i), Workspace: "ns", Key: []byte(realKey)}
	}
	p, err := New(Options{Authorizer: auth, Upstreams: map[string]string{"anthropic": up.URL}, Log: logr.Discard()})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(p)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: streams}}
	defer func() {
		client.CloseIdleConnections()
		srv.Close()
		p.CloseIdleConnections()
		up.Close()
	}()

	base := liveHeap()
	var atHalf, finished sync.WaitGroup
	atHalf.Add(streams)
	finished.Add(streams)
	errs := make(chan error, streams)
	for i := range streams {
		go func() {
			defer finished.Done()
			reached := false
			defer func() {
				if !reached {
					atHalf.Done()
				}
			}()
			req, _ := http.NewRequest("POST", srv.URL+"/llm/anthropic/v1/messages", strings.NewReader(`{"stream":true}`))
			req.Header.Set("X-Api-Key", fmt.Sprint("cred-", i))
			res, err := client.Do(req)
			if err != nil {
				errs <- err
				return
			}
			defer res.Body.Close()
			rd := bufio.NewReader(res.Body)
			var n int
			for {
				line, err := rd.ReadString('\n')
				n += len(line)
				if line == "event: half\n" {
					reached = true
					atHalf.Done()
				}
				if err == io.EOF {
					break
				}
				if err != nil {
					errs <- err
					return
				}
			}
			if want := events * len(payload); n < want {
				errs <- fmt.Errorf("stream %d: %d bytes, want over %d", i, n, want)
			}
		}()
	}
	atHalf.Wait()
	during := liveHeap()
	close(half)
	finished.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	growth := int64(during) - int64(base)
	t.Logf("live heap: %.1f MiB before, %.1f MiB with %d streams open half way (%.0f KiB per stream)",
		mib(base), mib(during), streams, float64(growth)/streams/1024)
	if limit := int64(64 << 20); growth > limit {
		t.Errorf("live heap grew %.1f MiB with %d streams open, over %d MiB", float64(growth)/(1<<20), streams, limit>>20)
	}
	var total Usage
	for _, d := range p.Drain() {
		total = total.Add(d.Usage)
	}
	if want := (Usage{Requests: streams, InputTokens: streams * 25, OutputTokens: streams * 15}); total != want {
		t.Errorf("usage %+v, want %+v", total, want)
	}
	if n := testutil.ToFloat64(p.m.streams); n != 0 {
		t.Errorf("active streams gauge %v once all answers ended", n)
	}
}

func liveHeap() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

func mib(b uint64) float64 { return float64(b) / (1 << 20) }
