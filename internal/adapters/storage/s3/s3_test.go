package s3_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/agentplane/agentplane/internal/adapters/storage"
	"github.com/agentplane/agentplane/internal/adapters/storage/s3"
	"github.com/agentplane/agentplane/internal/adapters/storage/storagetest"
)

const bucket = "agentplane-test"

func newStore(t *testing.T, addr, prefix string) *s3.Store {
	t.Helper()
	st, err := s3.New(s3.Config{
		Endpoint:        addr,
		Bucket:          bucket,
		AccessKey:       accessKey,
		SecretKey:       secretKey,
		Prefix:          prefix,
		PathStyle:       true,
		TempDir:         t.TempDir(),
		DialTimeout:     time.Second,
		ResponseTimeout: 5 * time.Second,
		OpTimeout:       10 * time.Second,
		Retries:         1,
	})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// TestAgainstServer runs the conformance suite against a real versitygw,
// then stops the server and checks that the store answers ErrUnavailable
// quickly, then restarts it on the same port and data dir and checks that
// the store works again and the data survived.
func TestAgainstServer(t *testing.T) {
	srv := startServer(t)
	st := newStore(t, srv.addr, "")
	ctx := t.Context()
	if err := st.Client().MakeBucket(ctx, bucket, minio.MakeBucketOptions{}); err != nil {
		t.Fatalf("MakeBucket: %v", err)
	}

	t.Run("Conformance", func(t *testing.T) { storagetest.Run(t, st) })
	t.Run("ConformanceWithPrefix", func(t *testing.T) {
		storagetest.Run(t, newStore(t, srv.addr, "agentplane/v1"))
	})
	t.Run("LargeObjectMultipart", func(t *testing.T) {
		// Above minio-go's 16 MiB part size: a multipart upload.
		space := storagetest.Spaces(1)[0]
		data := storagetest.RandomBytes(17<<20+5, 7)
		obj := storagetest.MustPut(t, st, space, data)
		storagetest.MustGet(t, st, space, obj.CID, data)
	})

	space := storagetest.Spaces(1)[0]
	kept := storagetest.MustPut(t, st, space, []byte("survives a restart"))

	srv.stop()
	t.Run("DownIsUnavailable", func(t *testing.T) {
		// The store gives up by itself (refused connections, few retries) long before its
		// caller's deadline, which it never reaches.
		ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
		defer cancel()
		check := func(what string, f func() error) {
			t.Helper()
			start := time.Now()
			err := f()
			t.Logf("%s while down: %v after %v", what, err, time.Since(start).Round(time.Millisecond))
			storagetest.WantErr(t, what+" while the server is down", err, storage.ErrUnavailable)
			if ctx.Err() != nil {
				t.Fatalf("%s while the server is down waited for its caller's deadline; want the store's own ErrUnavailable", what)
			}
		}
		check("Put", func() error {
			_, err := st.Put(ctx, space, strings.NewReader("while down"))
			return err
		})
		check("Get", func() error {
			rc, _, err := st.Get(ctx, space, kept.CID)
			if err == nil {
				_ = rc.Close()
			}
			return err
		})
		check("Stat", func() error { _, err := st.Stat(ctx, space, kept.CID); return err })
		check("List", func() error { _, err := st.List(ctx, space); return err })
		check("Delete", func() error { return st.Delete(ctx, space, kept.CID) })
	})

	srv.start()
	t.Run("BackAfterRestart", func(t *testing.T) {
		storagetest.MustGet(t, st, space, kept.CID, []byte("survives a restart"))
		again := storagetest.MustPut(t, st, space, []byte("after the restart"))
		storagetest.MustList(t, st, space, kept, again)
	})
}

// TestServerErrorsAreUnavailable: 5xx answers from a stub map to
// ErrUnavailable, a 403 does not. For Put the stub says 404 to HEAD, so Put
// goes on to the upload; for Get it answers every request with the error.
func TestServerErrorsAreUnavailable(t *testing.T) {
	for _, tc := range []struct {
		status      int
		code        string
		unavailable bool
	}{
		{http.StatusServiceUnavailable, "SlowDown", true},
		{http.StatusInternalServerError, "InternalError", true},
		{http.StatusForbidden, "AccessDenied", false},
	} {
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		st := newStore(t, stub(t, tc.status, tc.code, true), "")
		_, putErr := st.Put(ctx, "demo/public", bytes.NewReader([]byte("x")))
		st = newStore(t, stub(t, tc.status, tc.code, false), "")
		_, _, getErr := st.Get(ctx, "demo/public", storagetest.HelloCID)
		cancel()
		for op, err := range map[string]error{"Put": putErr, "Get": getErr} {
			if got := errors.Is(err, storage.ErrUnavailable); got != tc.unavailable || err == nil {
				t.Fatalf("%d %s: %s err = %v; ErrUnavailable = %v, want %v", tc.status, tc.code, op, err, got, tc.unavailable)
			}
			t.Logf("%d %s: %s: %v", tc.status, tc.code, op, err)
		}
	}
}

// stub starts an HTTP server answering every request with an S3 error and
// returns its host:port.
func stub(t *testing.T, status int, code string, headNotFound bool) string {
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		if r.Method == http.MethodHead {
			if headNotFound {
				w.WriteHeader(http.StatusNotFound)
			} else {
				w.WriteHeader(status)
			}
			return
		}
		w.Header().Set("Content-Type", "application/xml")
		w.WriteHeader(status)
		_, _ = io.WriteString(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>`+code+`</Code><Message>stub</Message></Error>`)
	}))
	t.Cleanup(hs.Close)
	return strings.TrimPrefix(hs.URL, "http://")
}

func TestConfigValidation(t *testing.T) {
	for _, cfg := range []s3.Config{
		{Bucket: "b"},
		{Endpoint: "127.0.0.1:9000"},
		{Endpoint: "http://127.0.0.1:9000", Bucket: "b"},
		{Endpoint: "127.0.0.1:9000", Bucket: "b", Prefix: "../x"},
	} {
		if _, err := s3.New(cfg); err == nil {
			t.Fatalf("New(%+v) accepted a bad config", cfg)
		}
	}
}
