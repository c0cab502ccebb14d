package dnsverify_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/agentplane/agentplane/internal/adapters/dnsverify"
	"github.com/agentplane/agentplane/internal/adapters/dnsverify/dnstest"
)

const record = "_agentplane-verify.docs.example.com"

func startServer(t *testing.T) *dnstest.Server {
	t.Helper()
	srv, err := dnstest.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	return srv
}

func TestLookupTXT(t *testing.T) {
	srv := startServer(t)
	c := dnsverify.New([]string{srv.Addr}, 500*time.Millisecond)
	ctx := context.Background()

	t.Run("found", func(t *testing.T) {
		srv.SetTXT(record, "one", "two")
		got, err := c.LookupTXT(ctx, record)
		if err != nil || strings.Join(got, ",") != "one,two" {
			t.Fatalf("got %q, %v", got, err)
		}
	})
	t.Run("long value split into strings is joined", func(t *testing.T) {
		long := strings.Repeat("x", 600)
		srv.SetTXT(record, long)
		got, err := c.LookupTXT(ctx, record)
		if err != nil || len(got) != 1 || got[0] != long {
			t.Fatalf("got %d values, %v", len(got), err)
		}
	})
	t.Run("NXDOMAIN is not found", func(t *testing.T) {
		got, err := c.LookupTXT(ctx, "_agentplane-verify.nowhere.example.com")
		if !errors.Is(err, dnsverify.ErrNotFound) {
			t.Fatalf("got %q, %v; want ErrNotFound", got, err)
		}
	})
	t.Run("NODATA is not found", func(t *testing.T) {
		srv.SetTXT("empty.example.com")
		if _, err := c.LookupTXT(ctx, "empty.example.com"); !errors.Is(err, dnsverify.ErrNotFound) {
			t.Fatalf("got %v; want ErrNotFound", err)
		}
	})
	t.Run("truncated UDP answer is retried over TCP", func(t *testing.T) {
		srv.SetTXT(record, "over-tcp")
		srv.SetMode(dnstest.TruncateUDP)
		defer srv.SetMode(dnstest.Normal)
		before := srv.TCPQueries()
		got, err := c.LookupTXT(ctx, record)
		if err != nil || len(got) != 1 || got[0] != "over-tcp" {
			t.Fatalf("got %q, %v", got, err)
		}
		if srv.TCPQueries() != before+1 {
			t.Fatalf("TCP queries %d, want %d", srv.TCPQueries(), before+1)
		}
	})
	for _, m := range []struct {
		name string
		mode dnstest.Mode
	}{{"SERVFAIL", dnstest.ServFail}, {"REFUSED", dnstest.Refuse}, {"no answer (timeout)", dnstest.Drop}} {
		t.Run(m.name+" is unavailable", func(t *testing.T) {
			srv.SetMode(m.mode)
			defer srv.SetMode(dnstest.Normal)
			// The lookup gives up by itself (the per-query timeout), not at its caller's deadline.
			ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
			defer cancel()
			_, err := c.LookupTXT(ctx, record)
			if !errors.Is(err, dnsverify.ErrUnavailable) || errors.Is(err, dnsverify.ErrNotFound) {
				t.Fatalf("got %v; want ErrUnavailable", err)
			}
			if ctx.Err() != nil {
				t.Fatal("the lookup waited for its caller's deadline; the per-query timeout is 500ms")
			}
		})
	}
}

func TestLookupTXTFallsBackToTheNextNameserver(t *testing.T) {
	down, up := startServer(t), startServer(t)
	down.Stop()
	up.SetTXT(record, "v")
	c := dnsverify.New([]string{down.Addr, up.Addr}, 300*time.Millisecond)
	got, err := c.LookupTXT(context.Background(), record)
	if err != nil || len(got) != 1 || got[0] != "v" {
		t.Fatalf("got %q, %v", got, err)
	}
}

func TestServerDownThenBack(t *testing.T) {
	srv := startServer(t)
	srv.SetTXT(record, "v")
	c := dnsverify.New([]string{srv.Addr}, 300*time.Millisecond)
	srv.Stop()
	if _, err := c.LookupTXT(context.Background(), record); !errors.Is(err, dnsverify.ErrUnavailable) {
		t.Fatalf("server down: got %v; want ErrUnavailable", err)
	}
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	if got, err := c.LookupTXT(context.Background(), record); err != nil || got[0] != "v" {
		t.Fatalf("server back: got %q, %v", got, err)
	}
}

func TestCheck(t *testing.T) {
	srv := startServer(t)
	c := dnsverify.New([]string{srv.Addr}, 300*time.Millisecond)
	key := []byte("0123456789abcdef0123456789abcdef")
	token := dnsverify.Token(key, "ws-a", "docs.example.com")
	ctx := context.Background()

	if r := dnsverify.Check(ctx, c, record, token); r.Outcome != dnsverify.Missing {
		t.Fatalf("no record: %+v", r)
	}
	srv.SetTXT(record, "something-else")
	r := dnsverify.Check(ctx, c, record, token)
	if r.Outcome != dnsverify.Mismatch || !strings.Contains(r.Message, "does not match") || strings.Contains(r.Message, token) {
		t.Fatalf("wrong value: %+v", r)
	}
	srv.SetTXT(record, "something-else", token)
	if r := dnsverify.Check(ctx, c, record, token); r.Outcome != dnsverify.Verified {
		t.Fatalf("right value among others: %+v", r)
	}
	srv.SetMode(dnstest.ServFail)
	if r := dnsverify.Check(ctx, c, record, token); r.Outcome != dnsverify.Unavailable {
		t.Fatalf("SERVFAIL: %+v", r)
	}
}

func TestToken(t *testing.T) {
	key := []byte("k")
	a := dnsverify.Token(key, "ws-a", "docs.example.com")
	if a != dnsverify.Token(key, "ws-a", "Docs.Example.com.") {
		t.Fatal("the same workspace and domain must get the same token")
	}
	if a == dnsverify.Token(key, "ws-b", "docs.example.com") || a == dnsverify.Token(key, "ws-a", "api.example.com") ||
		a == dnsverify.Token([]byte("other"), "ws-a", "docs.example.com") {
		t.Fatal("tokens must differ across workspaces, domains and keys")
	}
	if len(a) != 64 {
		t.Fatalf("token %q: want 64 hex characters", a)
	}
	if got := dnsverify.RecordName("AgentPlane", "Docs.Example.com."); got != record {
		t.Fatalf("record name %q", got)
	}
}

func TestSystemNameserversFromEnv(t *testing.T) {
	t.Setenv(dnsverify.NameserversEnv, "127.0.0.1:5353, 10.0.0.1:53")
	got := dnsverify.SystemNameservers()
	if strings.Join(got, ",") != "127.0.0.1:5353,10.0.0.1:53" {
		t.Fatalf("got %q", got)
	}
	t.Setenv(dnsverify.NameserversEnv, "")
	if got := dnsverify.SystemNameservers(); len(got) == 0 || !strings.Contains(got[0], ":") {
		t.Fatalf("resolv.conf: got %q", got)
	}
}
