package realnode

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/devtools/testenv"
	"github.com/agentplane/agentplane/test/e2e"
)

// BenchmarkRealNodeCreate measures, on the real node with the real engine, REST create to
// `running` (StatefulSet, claim bound by the provisioner, seed init container, gateway Ready)
// against the floor measured in the same run: a bare pod of the same image and pod template
// (its home an emptyDir, no claim) to Ready. Each iteration creates and deletes one of each,
// one at a time (an idle gateway holds about 850 MB).
//
//	go test -run '^$' -bench BenchmarkRealNodeCreate -benchtime 5x ./test/e2e/realnode/
func BenchmarkRealNodeCreate(b *testing.B) {
	if !testenv.RealNode(b) {
		return
	}
	p := e2e.StartDev(b, e2e.EngineDir(b), "--runtime", "kube")
	b.Cleanup(p.Stop)
	k8s := p.KubeClient()
	ctx := context.Background()
	// A holder agent, made before the timer: its pod template (with its Secrets and ConfigMap)
	// is the bare pods' template, and it runs through every measurement of both kinds alike.
	holder := e2e.CreateRunning(b, p, map[string]any{"name": "Template holder"})
	template := statefulSetTemplate(b, k8s, holder["id"].(string))
	var creates, pods []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		pod := barePod(template, i)
		start := time.Now()
		if err := k8s.Create(ctx, pod); err != nil {
			b.Fatal(err)
		}
		e2e.Eventually(b, "the bare gateway pod to be Ready", func() bool { return podReady(ctx, k8s, pod) })
		pods = append(pods, time.Since(start))
		if err := k8s.Delete(ctx, pod, client.GracePeriodSeconds(0)); err != nil {
			b.Fatal(err)
		}
		e2e.Eventually(b, "the bare pod to go", func() bool {
			return k8s.Get(ctx, client.ObjectKeyFromObject(pod), &corev1.Pod{}) != nil
		})

		start = time.Now()
		a := e2e.CreateRunning(b, p, map[string]any{"name": "Bench Agent"})
		creates = append(creates, time.Since(start))
		e2e.Must(b, p.Call("DELETE", "/v0/agents/"+a["id"].(string), nil), 200, "delete agent")
	}
	b.StopTimer()
	c, f := median(creates), median(pods)
	b.ReportMetric(c.Seconds(), "create-p50-s")
	b.ReportMetric(f.Seconds(), "barepod-p50-s")
	b.ReportMetric(c.Seconds()/f.Seconds(), "x-barepod")
	b.Logf("REST create to running p50 %s, bare pod of the same image to Ready p50 %s (ratio %.2f); creates %v, pods %v",
		c.Round(10*time.Millisecond), f.Round(10*time.Millisecond), c.Seconds()/f.Seconds(), creates, pods)
}

// statefulSetTemplate is the pod template of agent id's StatefulSet.
func statefulSetTemplate(b *testing.B, k8s client.Client, id string) *corev1.PodTemplateSpec {
	var sts appsv1.StatefulSetList
	if err := k8s.List(context.Background(), &sts, client.InNamespace("dev"), client.MatchingLabels{agentsv1.LabelAgent: id}); err != nil || len(sts.Items) != 1 {
		b.Fatalf("the agent's StatefulSet: %v (%d)", err, len(sts.Items))
	}
	return sts.Items[0].Spec.Template.DeepCopy()
}

// podReady refreshes pod and tells whether it is Ready.
func podReady(ctx context.Context, k8s client.Client, pod *corev1.Pod) bool {
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(pod), pod); err != nil {
		return false
	}
	return slices.ContainsFunc(pod.Status.Conditions, func(c corev1.PodCondition) bool {
		return c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue
	})
}

// barePod is the gateway pod of template with its home on an emptyDir: what the kubelet and
// the engine take without the manager, the StatefulSet or the claim.
func barePod(template *corev1.PodTemplateSpec, i int) *corev1.Pod {
	spec := template.Spec.DeepCopy()
	names := map[string]bool{}
	for _, v := range spec.Volumes {
		names[v.Name] = true
	}
	// The StatefulSet's claim templates are volumes its pod template does not list: each
	// becomes an emptyDir.
	for _, c := range append(slices.Clone(spec.InitContainers), spec.Containers...) {
		for _, m := range c.VolumeMounts {
			if !names[m.Name] {
				names[m.Name] = true
				spec.Volumes = append(spec.Volumes, corev1.Volume{Name: m.Name, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
			}
		}
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("bare-gateway-%d", i), Namespace: "dev"},
		Spec:       *spec,
	}
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}
