package agentplanetest_test

import (
	"context"
	"fmt"
	"net/http"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/pkg/agentplanetest"
)

// A control plane, agentplane on it, an Agent created as a custom resource and read back
// through the REST facade.
func Example() {
	env := agentplanetest.NewEnvironment() // envtest with agentplane's CRDs
	cfg, err := env.Start()
	if err != nil {
		panic(err)
	}
	defer env.Stop()
	ctx := context.Background()
	p, err := agentplanetest.Start(ctx, cfg)
	if err != nil {
		panic(err)
	}
	defer p.Stop()

	tok, err := p.Token("example") // creates the workspace "example" and its namespace
	if err != nil {
		panic(err)
	}
	agent := &agentsv1.Agent{
		ObjectMeta: metav1.ObjectMeta{Namespace: "example", Name: "hello"},
		Spec:       agentsv1.AgentSpec{DisplayName: "Hello"},
	}
	if err := p.Client().Create(ctx, agent); err != nil {
		panic(err)
	}
	for agent.Status.Phase != agentsv1.AgentRunning {
		time.Sleep(50 * time.Millisecond)
		if err := p.Client().Get(ctx, client.ObjectKeyFromObject(agent), agent); err != nil {
			panic(err)
		}
	}
	fmt.Println("agent", agent.Name, "is", agent.Status.Phase)

	req, _ := http.NewRequest(http.MethodGet, p.URL()+"/v0/agents/hello", nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		panic(err)
	}
	resp.Body.Close()
	fmt.Println("GET /v0/agents/hello:", resp.Status)
	// Output:
	// agent hello is running
	// GET /v0/agents/hello: 200 OK
}
