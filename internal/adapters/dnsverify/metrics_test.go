package dnsverify_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/agentplane/agentplane/internal/adapters/dnsverify"
	"github.com/agentplane/agentplane/internal/adapters/dnsverify/dnstest"
)

// Look-ups against a real DNS server on loopback count by result: a record, no record, a
// server that fails; a look-up the caller cancelled counts nothing.
func TestInstrumentCountsLookups(t *testing.T) {
	srv := startServer(t)
	srv.SetTXT("_agentplane-verify.ok.example.com", "token")
	reg := prometheus.NewPedanticRegistry()
	r := dnsverify.Instrument(dnsverify.New([]string{srv.Addr}, 0), reg)
	ctx := context.Background()
	if v, err := r.LookupTXT(ctx, "_agentplane-verify.ok.example.com"); err != nil || len(v) != 1 {
		t.Fatalf("lookup: %v %v", v, err)
	}
	if _, err := r.LookupTXT(ctx, "_agentplane-verify.missing.example.com"); !errors.Is(err, dnsverify.ErrNotFound) {
		t.Fatalf("lookup of a missing record: %v", err)
	}
	srv.SetMode(dnstest.ServFail)
	if _, err := r.LookupTXT(ctx, "_agentplane-verify.ok.example.com"); !errors.Is(err, dnsverify.ErrUnavailable) {
		t.Fatalf("lookup against SERVFAIL: %v", err)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := r.LookupTXT(cancelled, "_agentplane-verify.ok.example.com"); err == nil {
		t.Fatal("a cancelled look-up succeeded")
	}
	want := fmt.Sprintf(`
# HELP agentplane_dns_lookups_total %s
# TYPE agentplane_dns_lookups_total counter
agentplane_dns_lookups_total{result="error"} 1
agentplane_dns_lookups_total{result="not_found"} 1
agentplane_dns_lookups_total{result="ok"} 1
`, "TXT look-ups of domain ownership checks by result (ok; not_found: no record yet; error: DNS unavailable).")
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "agentplane_dns_lookups_total"); err != nil {
		t.Error(err)
	}
}
