package client_test

import (
	"bytes"
	"context"
	"errors"
	"mime/multipart"
	"testing"
	"time"

	"github.com/go-logr/logr"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/agentplane/agentplane/pkg/agentplanetest"
	"github.com/agentplane/agentplane/pkg/client"
)

// The generated client against a running facade (envtest, the engine double): one /v0 call and
// one /v3 call round-trip through the generated types, and an error answer carries the
// contract's message.
func TestClientRoundTrips(t *testing.T) {
	ctrl.SetLogger(logr.Discard())
	env := agentplanetest.NewEnvironment()
	cfg, err := env.Start()
	if err != nil {
		t.Fatalf("start envtest (KUBEBUILDER_ASSETS): %v", err)
	}
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Errorf("stop envtest: %v", err)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	p, err := agentplanetest.Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.Stop(); err != nil {
			t.Errorf("stop platform: %v", err)
		}
	})
	token, err := p.Token("client-test")
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(p.URL(), token)
	if err != nil {
		t.Fatal(err)
	}

	// /v0: create a secret, read it back from the list; its value is never answered.
	created, err := client.Checked(c.CreateSecretWithResponse(ctx, nil, client.CreateSecretJSONRequestBody{Name: "api-key", Value: "s3cr3t-value"}))
	if err != nil {
		t.Fatal(err)
	}
	if created.JSON201 == nil || created.JSON201.Secret.Name != "api-key" || created.JSON201.Secret.EnvName != "API_KEY" {
		t.Fatalf("create secret answered %s", created.Body)
	}
	if bytes.Contains(created.Body, []byte("s3cr3t-value")) {
		t.Fatal("the secret's value is in the answer")
	}
	secrets, err := client.Checked(c.ListSecretsWithResponse(ctx, nil))
	if err != nil {
		t.Fatal(err)
	}
	if secrets.JSON200 == nil || len(secrets.JSON200.Secrets) != 1 || secrets.JSON200.Secrets[0].Id != created.JSON201.Secret.Id {
		t.Fatalf("list secrets answered %s", secrets.Body)
	}
	// Decoded: the same answer as a type of the caller's own.
	decoded, err := client.Decoded[struct{ Secrets []client.Secret }](c.ListSecretsWithResponse(ctx, nil))
	if err != nil || len(decoded.Secrets) != 1 || decoded.Secrets[0].Id != created.JSON201.Secret.Id {
		t.Fatalf("Decoded list secrets: %+v, %v", decoded, err)
	}

	// /v3: upload a file (multipart, the generated WithBody variant) and find it in the list.
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	fw, err := mw.CreateFormFile("file", "hello.txt")
	if err != nil {
		t.Fatal(err)
	}
	_, _ = fw.Write([]byte("hello, agentplane"))
	_ = mw.WriteField("name", "hello.txt")
	if err := mw.Close(); err != nil {
		t.Fatal(err)
	}
	up, err := client.Checked(c.UploadFileWithBodyWithResponse(ctx, nil, mw.FormDataContentType(), &buf))
	if err != nil {
		t.Fatal(err)
	}
	if up.JSON200 == nil || up.JSON200.Data.Cid == "" {
		t.Fatalf("upload answered %s", up.Body)
	}
	files, err := client.Checked(c.ListFilesWithResponse(ctx, client.ListFilesParamsNetworkPublic, &client.ListFilesParams{}))
	if err != nil {
		t.Fatal(err)
	}
	if files.JSON200 == nil || len(files.JSON200.Data.Files) != 1 {
		t.Fatalf("list files answered %s", files.Body)
	}
	if f := files.JSON200.Data.Files[0]; f.Cid != up.JSON200.Data.Cid || f.Name != "hello.txt" || f.Size != int64(len("hello, agentplane")) {
		t.Fatalf("listed %+v, uploaded %+v", f, up.JSON200.Data)
	}

	// Errors: the /v0 and /v3 envelopes' messages, and a bad token.
	_, err = client.Checked(c.GetAgentWithResponse(ctx, "agt-missing", nil))
	wantError(t, err, 404, "Agent not found")
	_, err = client.Decoded[struct{ Agent client.Agent }](c.GetAgentWithResponse(ctx, "agt-missing", nil))
	wantError(t, err, 404, "Agent not found")
	_, err = client.Checked(c.GetFileWithResponse(ctx, client.GetFileParamsNetworkPublic, "no-such-file", nil))
	wantError(t, err, 404, "File not found")
	bad, err := client.New(p.URL(), "not-a-token")
	if err != nil {
		t.Fatal(err)
	}
	_, err = client.Checked(bad.ListAgentsWithResponse(ctx, nil))
	wantError(t, err, 401, "Invalid token")
}

func wantError(t *testing.T, err error, status int, message string) {
	t.Helper()
	var ce *client.Error
	if !errors.As(err, &ce) || ce.StatusCode != status || ce.Message != message {
		t.Fatalf("got error %v, want %d %s", err, status, message)
	}
}
