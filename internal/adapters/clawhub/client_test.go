package clawhub_test

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/agentplane/agentplane/internal/adapters/clawhub"
	"github.com/agentplane/agentplane/internal/adapters/clawhub/clawhubtest"
)

func TestSkillAndDownload(t *testing.T) {
	reg := clawhubtest.NewRegistry()
	defer reg.Close()
	v1 := clawhubtest.Files("SKILL.md", clawhubtest.SkillMD("hello", "v1"))
	v2 := clawhubtest.Files("SKILL.md", clawhubtest.SkillMD("hello", "v2"))
	reg.Add("hello", "Hello", "1.0.0", v1)
	reg.Add("hello", "Hello", "1.1.0", v2)
	c := clawhub.New(reg.URL + "/")

	sk, err := c.Skill(context.Background(), "hello")
	if err != nil {
		t.Fatal(err)
	}
	if sk != (clawhub.Skill{Slug: "hello", DisplayName: "Hello", LatestVersion: "1.1.0"}) {
		t.Fatalf("skill = %+v", sk)
	}
	got, err := c.Download(context.Background(), "hello", "1.0.0")
	if err != nil || !bytes.Equal(got, v1) {
		t.Fatalf("download = %d bytes, %v", len(got), err)
	}
	if _, err := c.Download(context.Background(), "hello", "9.9.9"); !errors.Is(err, clawhub.ErrNotFound) {
		t.Fatalf("unknown version: %v", err)
	}
	if _, err := c.Skill(context.Background(), "nope"); !errors.Is(err, clawhub.ErrNotFound) {
		t.Fatalf("unknown slug: %v", err)
	}
	for _, bad := range []string{"", "Hello", "../x", "a/b", "-a", strings.Repeat("a", 129)} {
		if _, err := c.Skill(context.Background(), bad); !errors.Is(err, clawhub.ErrInvalidSlug) {
			t.Fatalf("slug %q: %v", bad, err)
		}
	}
}

func TestDetailShapes(t *testing.T) {
	var body string
	var auth string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth = r.Header.Get("Authorization")
		if r.URL.EscapedPath() != "/hub/api/v1/skills/my.skill_x" {
			http.Error(w, r.URL.EscapedPath(), http.StatusTeapot)
			return
		}
		_, _ = w.Write([]byte(body))
	}))
	defer srv.Close()
	c := clawhub.New(srv.URL + "/hub")
	c.Token = "tok"
	cases := []struct {
		body string
		want clawhub.Skill
		err  error
	}{
		{`{"skill":{"slug":"my.skill_x"},"latestVersion":{"version":"2.0.0"}}`, clawhub.Skill{Slug: "my.skill_x", LatestVersion: "2.0.0"}, nil},
		{`{"skill":{"displayName":"X"},"latestVersion":null}`, clawhub.Skill{Slug: "my.skill_x", DisplayName: "X"}, nil},
		{`{"skill":null,"latestVersion":{"version":"1.0.0"}}`, clawhub.Skill{}, clawhub.ErrNotFound},
		{`not json`, clawhub.Skill{}, clawhub.ErrRegistry},
		{`{"skill":{},"latestVersion":{"version":"1.0.0; rm -rf /"}}`, clawhub.Skill{}, clawhub.ErrRegistry},
	}
	for _, tc := range cases {
		body = tc.body
		got, err := c.Skill(context.Background(), "my.skill_x")
		if tc.err != nil {
			if !errors.Is(err, tc.err) {
				t.Fatalf("%s: err = %v, want %v", tc.body, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Fatalf("%s: got %+v, %v", tc.body, got, err)
		}
	}
	if auth != "Bearer tok" {
		t.Fatalf("Authorization = %q", auth)
	}
}

func TestUnavailable(t *testing.T) {
	reg := clawhubtest.NewRegistry()
	reg.Add("hello", "", "1.0.0", clawhubtest.Files("SKILL.md", "x"))
	c := clawhub.New(reg.URL)
	for _, code := range []int{500, 502, 503, 429} {
		reg.FailWith(code)
		if _, err := c.Skill(context.Background(), "hello"); !errors.Is(err, clawhub.ErrUnavailable) {
			t.Fatalf("%d: %v", code, err)
		}
	}
	reg.FailWith(http.StatusForbidden)
	if _, err := c.Download(context.Background(), "hello", "1.0.0"); !errors.Is(err, clawhub.ErrRegistry) {
		t.Fatalf("403: %v", err)
	}
	reg.Close()
	if _, err := c.Skill(context.Background(), "hello"); !errors.Is(err, clawhub.ErrUnavailable) {
		t.Fatalf("closed server: %v", err)
	}

	// A registry that never answers: the client's own timeout gives up (the server sees its
	// request cancelled; it would otherwise wait until the test ends).
	block, cancelled := make(chan struct{}), make(chan struct{}, 1)
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-block:
		case <-r.Context().Done():
			cancelled <- struct{}{}
		}
	}))
	defer slow.Close()
	defer close(block)
	c = clawhub.New(slow.URL)
	c.Timeout = 200 * time.Millisecond
	if _, err := c.Download(context.Background(), "hello", "1.0.0"); !errors.Is(err, clawhub.ErrUnavailable) {
		t.Fatalf("timeout: %v", err)
	}
	<-cancelled
	// The caller giving up is the caller's error, not the registry's.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := c.Skill(ctx, "hello"); !errors.Is(err, context.Canceled) || errors.Is(err, clawhub.ErrUnavailable) {
		t.Fatalf("canceled: %v", err)
	}
}

func TestDownloadCap(t *testing.T) {
	payload := bytes.Repeat([]byte("x"), 4096)
	chunked := false
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if chunked {
			// No Content-Length: the limit applies while streaming.
			for i := 0; i < 4; i++ {
				_, _ = w.Write(payload[:1024])
				w.(http.Flusher).Flush()
			}
			return
		}
		_, _ = w.Write(payload)
	}))
	defer srv.Close()
	c := clawhub.New(srv.URL)
	c.MaxDownloadBytes = 4095
	for _, chunked = range []bool{false, true} {
		_, err := c.Download(context.Background(), "big", "1.0.0")
		var tl *clawhub.TooLargeError
		if !errors.Is(err, clawhub.ErrTooLarge) || !errors.As(err, &tl) || tl.Limit != 4095 {
			t.Fatalf("chunked=%v: %v", chunked, err)
		}
	}
	c.MaxDownloadBytes = 4096
	if got, err := c.Download(context.Background(), "big", "1.0.0"); err != nil || len(got) != 4096 {
		t.Fatalf("at the limit: %d, %v", len(got), err)
	}
	if clawhub.New("").MaxDownloadBytes != 20<<20 || clawhub.New("").BaseURL != clawhub.DefaultURL {
		t.Fatal("defaults")
	}
}
