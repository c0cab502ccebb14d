package ops

import (
	"context"
	"errors"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/scheme"
)

func file(name string, network agentsv1.Network, created string, kv map[string]string) *agentsv1.File {
	return &agentsv1.File{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ws", Name: name},
		Spec:       agentsv1.FileSpec{Network: network, CID: "cid-" + name, Name: name + ".txt", MimeType: "text/plain", CreatedAt: created, KeyValues: kv},
	}
}

// TestFilesPagesAndFilters: a listing is newest first (or oldest with Ascending), pages
// through its token, keeps to its network and filters, and refuses a token it did not make.
func TestFilesPagesAndFilters(t *testing.T) {
	c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(
		file("a", agentsv1.NetworkPublic, "2026-01-01T00:00:00.000Z", map[string]string{"team": "x"}),
		file("b", agentsv1.NetworkPublic, "2026-01-02T00:00:00.000Z", nil),
		file("c", agentsv1.NetworkPublic, "2026-01-03T00:00:00.000Z", map[string]string{"team": "x"}),
		file("p", agentsv1.NetworkPrivate, "2026-01-04T00:00:00.000Z", nil),
	).Build()
	o := New(Deps{Client: c})
	ctx, ten := context.Background(), Scope{Namespace: "ws"}
	names := func(fs []agentsv1.File) (out []string) {
		for _, f := range fs {
			out = append(out, f.Name)
		}
		return out
	}

	page, next, err := o.Files(ctx, ten, agentsv1.NetworkPublic, FileQuery{Limit: 2})
	if err != nil || len(page) != 2 || page[0].Name != "c" || page[1].Name != "b" || next == "" {
		t.Fatalf("first page %v next %q err %v; want [c b] and a token", names(page), next, err)
	}
	page, next, err = o.Files(ctx, ten, agentsv1.NetworkPublic, FileQuery{Limit: 2, PageToken: next})
	if err != nil || len(page) != 1 || page[0].Name != "a" || next != "" {
		t.Fatalf("last page %v next %q err %v; want [a] and no token", names(page), next, err)
	}
	page, _, err = o.Files(ctx, ten, agentsv1.NetworkPublic, FileQuery{Ascending: true, KeyValues: map[string]string{"team": "x"}})
	if err != nil || len(page) != 2 || page[0].Name != "a" || page[1].Name != "c" {
		t.Fatalf("filtered ascending %v err %v; want [a c]", names(page), err)
	}
	_, _, err = o.Files(ctx, ten, agentsv1.NetworkPublic, FileQuery{PageToken: "!!"})
	var e *Error
	if !errors.As(err, &e) || e.Code != Invalid || e.Message != MsgInvalidPageToken {
		t.Fatalf("bad token: %v", err)
	}
	if _, err := o.File(ctx, ten, agentsv1.NetworkPublic, "p"); !errors.As(err, &e) || e.Code != NotFound {
		t.Fatalf("a private file read on the public network: %v, want NotFound", err)
	}
}
