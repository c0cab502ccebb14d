package localcluster_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/agentplane/agentplane/internal/devtools/images"
	"github.com/agentplane/agentplane/internal/devtools/localcluster"
)

// checkServiceNetwork proves kube-proxy and the cluster DNS: a Service in front of a pod
// answers on its ClusterIP from the node, another pod resolves the Service's short name
// (through its search domains) to that ClusterIP and fetches it by its full name, and a third
// verifies the API server's certificate through the `kubernetes` Service.
func checkServiceNetwork(ctx context.Context, t *testing.T, c *localcluster.Cluster, ref string) {
	t.Helper()
	const ns = "default"
	pod := func(name string, restart corev1.RestartPolicy, args ...string) *corev1.Pod {
		return netcheckPod(ref, ns, name, restart, args...)
	}
	web := pod("web", corev1.RestartPolicyAlways, "serve", ":8080")
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{"app": "web"},
			Ports:    []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}},
		},
	}
	for _, o := range []client.Object{web, svc} {
		if err := c.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	url := fmt.Sprintf("http://%s:80/", svc.Spec.ClusterIP)
	// A new connection each try: one opened before kube-proxy's rule was in place went
	// elsewhere, and a kept-alive one would stay there.
	hc := &http.Client{Timeout: 3 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	eventually(t, 2*time.Minute, func() error {
		resp, err := hc.Get(url)
		if err != nil {
			return fmt.Errorf("the node reaches the ClusterIP: %w", err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if string(b) != "netcheck" {
			return fmt.Errorf("%s answered %s %q", url, resp.Status, b)
		}
		return nil
	})
	// Pods resolve the Service's short name, reach it, and reach the API server through the
	// `kubernetes` Service (its name and its ClusterIP, where in-cluster clients dial) with
	// TLS verified against the service-account CA.
	fqdn := "web." + ns + ".svc." + localcluster.ClusterDomain
	cl := pod("client", corev1.RestartPolicyNever, "get", "web", svc.Spec.ClusterIP, "http://"+fqdn+"/")
	api := pod("apiserver", corev1.RestartPolicyNever, "tls", "https://kubernetes.default.svc/version", "https://"+localcluster.KubernetesServiceIP+"/version")
	for _, p := range []*corev1.Pod{cl, api} {
		if err := c.Client.Create(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range []*corev1.Pod{cl, api} {
		eventually(t, 2*time.Minute, func() error {
			if err := c.Client.Get(ctx, client.ObjectKeyFromObject(p), p); err != nil {
				return err
			}
			switch p.Status.Phase {
			case corev1.PodSucceeded:
				return nil
			case corev1.PodFailed:
				t.Fatalf("pod %s failed (exit 2: web did not resolve to %s; 3: %s did not answer; 4: the API server's certificate or answer): %+v",
					p.Name, svc.Spec.ClusterIP, fqdn, p.Status.ContainerStatuses)
			}
			return fmt.Errorf("pod %s %s", p.Name, p.Status.Phase)
		})
	}
	for _, o := range []client.Object{cl, api, web, svc} {
		if err := c.Client.Delete(ctx, o, client.GracePeriodSeconds(0)); err != nil {
			t.Fatal(err)
		}
	}
}

// importNetcheck builds the netcheck probe (testdata/netcheck), imports an image holding only
// it into the node and returns the image's reference.
func importNetcheck(ctx context.Context, t *testing.T, c *localcluster.Cluster) string {
	t.Helper()
	dir := t.TempDir()
	bin := filepath.Join(dir, "netcheck")
	build := exec.Command("go", "build", "-o", bin, "./testdata/netcheck")
	build.Env = append(build.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build netcheck: %v\n%s", err, out)
	}
	const ref = "agentplane.local/netcheck:test"
	spec, err := images.BinarySpec(ref, bin, "/netcheck", "65534:65534")
	if err != nil {
		t.Fatal(err)
	}
	tarball, err := images.Ensure(dir, spec)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Import(ctx, tarball); err != nil {
		t.Fatal(err)
	}
	return ref
}

// netcheckPod runs netcheck with args, labelled app=name.
func netcheckPod(ref, ns, name string, restart corev1.RestartPolicy, args ...string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{"app": name}},
		Spec: corev1.PodSpec{RestartPolicy: restart, Containers: []corev1.Container{{
			Name: "c", Image: ref, ImagePullPolicy: corev1.PullNever, Args: args,
		}}},
	}
}
