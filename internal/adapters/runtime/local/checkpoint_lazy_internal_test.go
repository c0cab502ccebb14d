package local

import (
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestPageServerThatFailsEndsItsGateway: a page server that ends in failure while its
// restored gateway runs (pages it had not copied are missing for good) ends the gateway and
// says why; one that ends well, or whose gateway is already gone, ends nothing.
func TestPageServerThatFailsEndsItsGateway(t *testing.T) {
	for _, tc := range []struct {
		name, server string
		gatewayGone  bool
		wantKilled   bool
	}{
		{"fails while the gateway runs", "exit 3", false, true},
		{"copies every page", "exit 0", false, false},
		{"fails after the gateway ended", "exit 3", true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			gw := exec.Command("sleep", "300")
			if err := gw.Start(); err != nil {
				t.Fatal(err)
			}
			exited := make(chan struct{})
			go func() { _ = gw.Wait(); close(exited) }()
			t.Cleanup(func() { _ = gw.Process.Kill(); <-exited })
			restored := procRef{pid: gw.Process.Pid}
			if st, err := readProcStat(restored.pid); err == nil {
				restored.start = st.start
			}
			if tc.gatewayGone {
				_ = gw.Process.Kill()
				<-exited
			}
			server, err := startPageServer(exec.Command("sh", "-c", tc.server))
			if err != nil {
				t.Fatal(err)
			}
			lp := &lazyPages{done: make(chan struct{})}
			lp.serve(server, time.Minute, restored, "")
			// serve returns once it has killed the gateway and seen it gone: asked of the
			// process itself, not of its Wait here, which may not have returned yet (make test
			// read "not killed" once, under load).
			killed := !tc.gatewayGone && !procAlive(restored.pid, restored.start)
			if killed != tc.wantKilled {
				t.Fatalf("gateway killed: %v, want %v", killed, tc.wantKilled)
			}
			err = lp.failure()
			if tc.wantKilled != (err != nil) || err != nil && !strings.Contains(err.Error(), "criu lazy-pages: exit status 3") {
				t.Fatalf("failure() = %v", err)
			}
		})
	}
}
