package controllers_test

import (
	"context"
	"fmt"
	"sync"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/adapters/runtime"
	"github.com/agentplane/agentplane/internal/adapters/runtime/kube"
)

func namespace(name string) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
}

// agentPasses counts the Agent controller's passes of startAgentManager's last manager.
var agentPasses *countedRuntime

// countedRuntime counts the Agent controller's passes per agent: each pass that reaches the
// runtime calls Ensure once. One agent's passes run one at a time, so a pass that has begun
// means every earlier pass of that agent has ended.
type countedRuntime struct {
	*kube.Runtime
	mu     sync.Mutex
	passes map[types.NamespacedName]int
}

func (c *countedRuntime) Ensure(ctx context.Context, a *agentsv1.Agent, d runtime.Desired) (runtime.Observed, error) {
	c.mu.Lock()
	c.passes[client.ObjectKeyFromObject(a)]++
	c.mu.Unlock()
	return c.Runtime.Ensure(ctx, a, d)
}

func (c *countedRuntime) count(key types.NamespacedName) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.passes[key]
}

// settle waits until a pass of a's that began after this call has ended: it touches the
// agent's pod (an annotation: a pass, no change the controller reacts to), waits for that pass
// to begin, then touches it again and waits for the next one, which begins only after it.
func (c *countedRuntime) settle(a *agentsv1.Agent) {
	key := client.ObjectKeyFromObject(a)
	for range 2 {
		n := c.count(key)
		pod := &corev1.Pod{}
		Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: a.Namespace, Name: a.Name + "-0"}, pod)).To(Succeed())
		patch := client.MergeFrom(pod.DeepCopy())
		if pod.Annotations == nil {
			pod.Annotations = map[string]string{}
		}
		pod.Annotations["test.agentplane.io/touch"] = fmt.Sprint(n)
		Expect(k8sClient.Patch(ctx, pod, patch)).To(Succeed())
		Eventually(func() int { return c.count(key) }).Should(BeNumerically(">", n))
	}
}
