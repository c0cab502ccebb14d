package benchkit

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/agentplane/agentplane/hack/bench/internal/report"
)

// Main runs a fleet benchmark's run with the controllers' log discarded and a context that an
// interrupt or SIGTERM ends (so the run stops its platform), writes its results to jsonOut
// (report.Write: nothing when empty), and exits 1 with the error when either fails.
func Main(jsonOut string, run func(context.Context) ([]report.Result, error)) {
	ctrllog.SetLogger(logr.Discard())
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	rs, err := run(ctx)
	if err == nil {
		err = report.Write(jsonOut, rs)
	}
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}
