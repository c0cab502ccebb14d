package realnode

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	appsv1 "k8s.io/api/apps/v1"
	authzv1 "k8s.io/api/authorization/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/hack/genchart/gen"
	"github.com/agentplane/agentplane/internal/devtools/images"
	"github.com/agentplane/agentplane/internal/devtools/localcluster"
	"github.com/agentplane/agentplane/internal/devtools/testenv"
	"github.com/agentplane/agentplane/internal/devtools/testenv/kubeenv"
	"github.com/agentplane/agentplane/internal/rules/secrets"
	"github.com/agentplane/agentplane/internal/scheme"
	"github.com/agentplane/agentplane/test/e2e"
)

// TestRealNodeDeploy deploys the manager into the local cluster as a platform team does, both
// ways, on one cluster (a cluster start and stop is a minute or more of the package's time):
//
//   - the Helm chart, upgraded (upgradeWithHelm): `helm install` of an earlier commit's chart
//     and manager, agents, `helm upgrade` to the chart under test; then the checks of every
//     deployment (realNodeDeploy) and the failover's figures (checkFailover);
//   - config/local (config/default with the local images) after `helm uninstall`, and its
//     checks of every deployment;
//   - an Agent lost as in a restore of a stale backup, and found again (checkLostAgent);
//   - then, the manager scaled to zero, the runtime contract on the real kubelet
//     (checkRuntimeContract).
//
// The checks of every deployment: a two-replica Deployment from the manager's image, one
// leading, its own ServiceAccount with the generated RBAC (not an admin); a client reaches the
// REST facade through its Service's ClusterIP (kube-proxy), creates an agent that runs on the
// real node, execs in it and snapshots its workspace onto the storage claim; the in-cluster
// manager talks to the API server through the `kubernetes` Service with TLS verified.
func TestRealNodeDeploy(t *testing.T) {
	if !testenv.RealNode(t) {
		return
	}
	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		t.Fatalf("kubectl renders config/local (kubectl kustomize): %v", err)
	}
	helm, err := gen.Helm(testenv.RepoRoot())
	if err != nil {
		t.Fatal(err)
	}
	prev, prevImage := previousManager(t)
	_, probe := e2e.BuildAgentplane(t)
	var h helmRelease
	realNodeDeploy(t, deployTest{
		images: append(contractImages(t, probe), prevImage),
		install: func(ctx context.Context, d *deployment) {
			h = helmRelease{t: t, helm: helm, kubeconfig: d.cl.Kubeconfig}
			upgradeWithHelm(ctx, t, d, h, prev, prevImage)
		},
		after: func(ctx context.Context, d *deployment) {
			t.Run("failover", func(t *testing.T) { checkFailover(ctx, t, d) })
			h.run("uninstall")
			e2e.Eventually(t, "the chart's manager to be gone", func() bool { return len(d.allManagerPods(ctx)) == 0 })
			d.facade = nil // config/local's Service gets a ClusterIP of its own
			t.Run("config/local", func(t *testing.T) {
				rendered, err := exec.Command(kubectl, "kustomize", filepath.Join(testenv.RepoRoot(), "config", "local")).Output()
				if err != nil {
					t.Fatalf("kubectl kustomize config/local: %v", err)
				}
				applyManifests(ctx, t, d.k8s, rendered)
				// helm uninstall keeps the chart's secrets key (a lost key makes every sealed
				// secret unreadable), which config/local's manager reads.
				err = d.k8s.Create(ctx, &corev1.Secret{
					ObjectMeta: metav1.ObjectMeta{Name: secrets.KeySecretName, Namespace: deployNamespace},
					StringData: map[string]string{"key": strings.Repeat("k", 32)},
				})
				if !apierrors.IsAlreadyExists(err) {
					t.Fatalf("the chart's secrets key after helm uninstall: %v", err)
				}
				d.checkDeployment(ctx, t)
			})
			t.Run("a lost agent", func(t *testing.T) { checkLostAgent(ctx, t, d) })
			t.Run("runtime contract", func(t *testing.T) { checkRuntimeContract(ctx, t, d) })
		},
	})
}

const deployNamespace = "agentplane-system"

// applyManifests applies every object of a rendered YAML stream server-side.
func applyManifests(ctx context.Context, t *testing.T, k8s client.Client, rendered []byte) {
	t.Helper()
	objs, err := testenv.DecodeManifests(rendered)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		if err := k8s.Apply(ctx, client.ApplyConfigurationFromUnstructured(o), client.FieldOwner("deploy-test"), client.ForceOwnership); err != nil {
			t.Fatalf("apply %s %s: %v", o.GetKind(), o.GetName(), err)
		}
	}
}

// deployment is the manager deployed into the local cluster by a deploy test.
type deployment struct {
	t      *testing.T
	cl     *localcluster.Cluster
	k8s    client.Client
	bin    string // the agentplane binary under test (token create)
	facade *e2e.Platform
	// agent is a running agent the install left for the common checks (checkDeployedAgent),
	// which delete it; "" has them create one.
	agent string
}

// deployTest is what a deploy test adds to realNodeDeploy.
type deployTest struct {
	// images are more images to import (an earlier manager).
	images []images.Spec
	// install deploys the manager under test into deployNamespace (and may go through an
	// earlier version first).
	install func(ctx context.Context, d *deployment)
	// after runs more checks once the common ones passed.
	after func(ctx context.Context, d *deployment)
}

// realNodeDeploy starts the local cluster with the manager's and the gateway's images,
// deploys the manager with install (which also provides the secrets key) and checks what a
// platform team depends on: both replicas available, one leading, the ServiceAccount no
// admin, an agent created through the facade's ClusterIP running on the real node, a secret
// sealed, a snapshot on the storage claim; the cluster's stop leaves nothing.
func realNodeDeploy(t *testing.T, dt deployTest) {
	ctrllog.SetLogger(logr.Discard()) // the cluster's client logs nothing the test reads
	baseline := localcluster.TakeBaseline()
	begin := time.Now()
	engine := e2e.EngineDir(t)
	bin, probe := e2e.BuildAgentplane(t)
	gateway, err := images.GatewaySpec(engine, e2e.EngineVersion(t, engine), probe)
	if err != nil {
		t.Fatal(err)
	}
	// The manager's image holds the binary as the shipped image does (no development tooling).
	manager, err := images.ManagerSpec(e2e.BuildShippedManager(t))
	if err != nil {
		t.Fatal(err)
	}
	var tarballs []string
	for _, s := range append([]images.Spec{gateway, manager}, dt.images...) {
		f, err := images.Ensure(images.CacheDir(), s)
		if err != nil {
			t.Fatal(err)
		}
		tarballs = append(tarballs, f)
	}
	ctx := context.Background()
	t.Logf("binaries and images ready after %s", time.Since(begin).Round(time.Second))
	cl, err := localcluster.Start(ctx, localcluster.Options{BinDir: kubeenv.AssetsDir(), Images: tarballs, Scheme: scheme.New()})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("the cluster started after %s", time.Since(begin).Round(time.Second))
	dir := cl.Dir
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			_ = cl.Stop()
		}
	})
	t.Cleanup(func() { // before the stop (cleanups run last first): the drain takes the logs
		if t.Failed() {
			t.Logf("the cluster's container logs:\n%s", cl.PodLogTails(40))
		}
	})
	d := &deployment{t: t, cl: cl, k8s: cl.Client, bin: bin}
	dt.install(ctx, d)
	t.Logf("the manager installed after %s", time.Since(begin).Round(time.Second))
	d.checkDeployment(ctx, t)
	if dt.after != nil {
		dt.after(ctx, d)
	}

	stopped = true
	if err := cl.Stop(); err != nil {
		t.Fatal(err)
	}
	left, err := localcluster.LeftoversAfterStop(dir, baseline)
	if err != nil {
		t.Fatal(err)
	}
	if len(left) > 0 {
		t.Errorf("the cluster's stop left behind:\n%s", strings.Join(left, "\n"))
	}
}

// checkDeployment checks what every deployment of the manager owes: both replicas of its
// image available, one leading, its ServiceAccount no admin, an agent through the facade.
func (d *deployment) checkDeployment(ctx context.Context, t *testing.T) {
	t.Helper()
	deploy := d.waitAvailable(ctx, images.ManagerImage)
	t.Run("one replica leads", func(t *testing.T) {
		e2e.Eventually(t, "a lease held by a manager pod", func() bool {
			_, ok := d.leader(ctx)
			return ok
		})
	})
	t.Run("the manager's ServiceAccount is not an admin", func(t *testing.T) {
		checkNotAdmin(ctx, t, d.k8s, "system:serviceaccount:"+deployNamespace+":"+deploy.Spec.Template.Spec.ServiceAccountName)
	})
	t.Run("an agent through the in-cluster facade", func(t *testing.T) { checkDeployedAgent(ctx, t, d) })
}

// waitAvailable waits until the manager Deployment runs image on both replicas, all updated.
func (d *deployment) waitAvailable(ctx context.Context, image string) appsv1.Deployment {
	d.t.Helper()
	var deploy appsv1.Deployment
	e2e.Eventually(d.t, "the manager Deployment to be available with both replicas of "+image, func() bool {
		err := d.k8s.Get(ctx, client.ObjectKey{Namespace: deployNamespace, Name: "agentplane-controller-manager"}, &deploy)
		return err == nil && deploy.Status.ObservedGeneration >= deploy.Generation &&
			deploy.Spec.Template.Spec.Containers[0].Image == image && deploy.Status.Replicas == 2 &&
			deploy.Status.AvailableReplicas == 2 && deploy.Status.UpdatedReplicas == 2
	})
	return deploy
}

// allManagerPods are the manager's pods, terminating ones too.
func (d *deployment) allManagerPods(ctx context.Context) []corev1.Pod {
	d.t.Helper()
	var pods corev1.PodList
	if err := d.k8s.List(ctx, &pods, client.InNamespace(deployNamespace),
		client.MatchingLabels{"app.kubernetes.io/component": "manager"}); err != nil {
		d.t.Fatal(err)
	}
	return pods.Items
}

// managerPods are the manager's running pods.
func (d *deployment) managerPods(ctx context.Context) []corev1.Pod {
	var live []corev1.Pod
	for _, p := range d.allManagerPods(ctx) {
		if p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning {
			live = append(live, p)
		}
	}
	return live
}

// leader is the manager pod holding the leader lease.
func (d *deployment) leader(ctx context.Context) (corev1.Pod, bool) {
	var lease coordinationv1.Lease
	if d.k8s.Get(ctx, client.ObjectKey{Namespace: deployNamespace, Name: "agentplane.io"}, &lease) != nil ||
		lease.Spec.HolderIdentity == nil {
		return corev1.Pod{}, false
	}
	for _, p := range d.managerPods(ctx) {
		if strings.HasPrefix(*lease.Spec.HolderIdentity, p.Name+"_") {
			return p, true
		}
	}
	return corev1.Pod{}, false
}

// client is the facade through the API Service's ClusterIP (kube-proxy), with a token of the
// workspace demo.
func (d *deployment) client(ctx context.Context, t *testing.T) *e2e.Platform {
	t.Helper()
	if d.facade == nil {
		token := createTokenIn(d.t, d.bin, d.cl.Kubeconfig)
		var svc corev1.Service
		if err := d.k8s.Get(ctx, client.ObjectKey{Namespace: deployNamespace, Name: "agentplane-api"}, &svc); err != nil {
			d.t.Fatal(err)
		}
		d.facade = e2e.Remote(d.t, "http://"+svc.Spec.ClusterIP, token)
	}
	d.waitFacade(t)
	return d.facade
}

// waitFacade waits until the facade answers through its Service (kube-proxy programs a new
// Service, or new endpoints, a moment after the pods are ready). Each try opens a new
// connection: one opened before kube-proxy's rule was in place left through the host's default
// route (whatever answers there, a proxy's 404 on this machine), and a kept-alive one would stay
// there. Only the facade's own answer counts (its request id header).
func (d *deployment) waitFacade(t *testing.T) {
	t.Helper()
	hc := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	var last string
	if e2e.Within(e2e.EventBound, func() bool {
		resp, err := hc.Get(d.facade.URL + "/healthz")
		if err != nil {
			last = err.Error()
			return false
		}
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		resp.Body.Close()
		last = fmt.Sprintf("%s %q (server %q)", resp.Status, body, resp.Header.Get("Server"))
		return resp.StatusCode == http.StatusOK && resp.Header.Get("X-Request-Id") != ""
	}) {
		return
	}
	t.Fatalf("timed out after %s waiting for the facade to answer through its Service (last: %s)\n%s",
		e2e.EventBound, last, serviceState(d.k8s, deployNamespace, "agentplane-api"))
}

// serviceState is what a Service that does not answer needs looked at: its endpoints as the
// API server has them, whether kube-proxy runs, and the NAT rules it wrote for the Service.
func serviceState(k8s client.Client, ns, name string) string {
	ctx := context.Background()
	var b strings.Builder
	var svc corev1.Service
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &svc); err != nil {
		return "service: " + err.Error()
	}
	fmt.Fprintf(&b, "service %s/%s: clusterIP %s ports %v\n", ns, name, svc.Spec.ClusterIP, svc.Spec.Ports)
	var slices discoveryv1.EndpointSliceList
	if err := k8s.List(ctx, &slices, client.InNamespace(ns), client.MatchingLabels{discoveryv1.LabelServiceName: name}); err != nil {
		fmt.Fprintf(&b, "endpoint slices: %v\n", err)
	}
	for _, sl := range slices.Items {
		for _, ep := range sl.Endpoints {
			fmt.Fprintf(&b, "endpoint %v ready=%v serving=%v terminating=%v\n", ep.Addresses,
				ptr.Deref(ep.Conditions.Ready, false), ptr.Deref(ep.Conditions.Serving, false), ptr.Deref(ep.Conditions.Terminating, false))
		}
	}
	ps, _ := exec.Command("pgrep", "-a", "kube-proxy").CombinedOutput()
	fmt.Fprintf(&b, "kube-proxy: %s\n", strings.TrimSpace(string(ps)))
	nat, _ := exec.Command("iptables-save", "-t", "nat").Output()
	for _, line := range strings.Split(string(nat), "\n") {
		if strings.Contains(line, svc.Spec.ClusterIP) || strings.Contains(line, ns+"/"+name) {
			fmt.Fprintln(&b, line)
		}
	}
	return b.String()
}

// checkNotAdmin expects the API server to refuse sa what only an admin may do.
func checkNotAdmin(ctx context.Context, t *testing.T, k8s client.Client, sa string) {
	for _, attrs := range []authzv1.ResourceAttributes{
		{Verb: "*", Group: "*", Resource: "*"},
		{Verb: "create", Group: "rbac.authorization.k8s.io", Resource: "clusterrolebindings"},
		{Verb: "delete", Resource: "nodes"},
	} {
		sar := &authzv1.SubjectAccessReview{Spec: authzv1.SubjectAccessReviewSpec{User: sa, ResourceAttributes: &attrs}}
		if err := k8s.Create(ctx, sar); err != nil {
			t.Fatal(err)
		}
		if sar.Status.Allowed {
			t.Errorf("%s may %s %s/%s", sa, attrs.Verb, attrs.Group, attrs.Resource)
		}
	}
}

// checkDeployedAgent creates an agent through the in-cluster facade (or takes d.agent, one the
// install left running), expects it on the real node, seals a secret with the deployment's key,
// execs in it, snapshots it onto the storage claim and deletes it.
func checkDeployedAgent(ctx context.Context, t *testing.T, d *deployment) {
	p, k8s := d.client(ctx, t), d.k8s
	id := d.agent
	d.agent = ""
	if id == "" {
		id = e2e.CreateRunning(t, p, map[string]any{"name": "Deployed"})["id"].(string)
	}
	base := "/v0/agents/" + id
	e2e.Eventually(t, "the agent to run", func() bool {
		r := p.Call("GET", base, nil)
		return r.Status == 200 && r.Obj("agent")["status"] == "running"
	})
	pod := gatewayPod(t, k8s, "demo", id)
	if pod.Spec.NodeName != d.cl.NodeName {
		t.Errorf("the gateway runs on %q", pod.Spec.NodeName)
	}
	// The secrets key the deployment provides seals workspace secrets.
	secret := "DEPLOY_CHECK_" + strings.ToUpper(strings.TrimPrefix(id, "agt-")) // one per deployment checked
	e2e.Must(t, p.Call("POST", "/v0/secrets", map[string]string{"name": secret, "value": "sealed-by-the-deployed-key"}), 201, "create secret")
	r := e2e.Must(t, p.Call("POST", base+"/console/exec", map[string]string{"command": "echo hi from $(cat /etc/hostname)"}), 200, "exec")
	if r.Str("stdout") != "hi from "+pod.Name+"\n" {
		t.Fatalf("exec: %s", r.Raw)
	}
	// Snapshots go to the storage claim the deployment mounts.
	snap := e2e.Must(t, p.Call("POST", base+"/snapshots/sync", nil), 201, "snapshot sync").Obj("snapshot")
	if cid, _ := snap["cid"].(string); !strings.HasPrefix(cid, "baf") {
		t.Fatalf("snapshot: %v", snap)
	}
	e2e.Must(t, p.Call("DELETE", base, nil), 200, "delete")
	e2e.Eventually(t, "the agent's pod to be gone", func() bool {
		var pods corev1.PodList
		return k8s.List(ctx, &pods, client.InNamespace("demo"), client.MatchingLabels{agentsv1.LabelAgent: id}) == nil && len(pods.Items) == 0
	})
}

// createTokenIn creates a workspace `demo` and a token of it with every scope, as a platform
// team does with `agentplane token create` against the cluster of kubeconfig.
func createTokenIn(t *testing.T, bin, kubeconfig string) string {
	t.Helper()
	cmd := exec.Command(bin, "token", "create", "--workspace", "demo", "--create-workspace", "--user", "e2e", "--scopes", "*", "--role", "owner")
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("agentplane token create: %v\n%s", err, stderr.String())
	}
	return strings.TrimSpace(string(out))
}
