// Package localcluster runs a Kubernetes cluster on this machine with one real node: etcd and
// kube-apiserver (through envtest's control plane), kube-controller-manager, kube-scheduler,
// a kubelet on Debian's containerd and runc with a CNI bridge, kube-proxy, kube-router's
// network policy firewall (NetworkPolicies are enforced), a cluster DNS server, and a volume
// provisioner with a default StorageClass. Every binary is built from the pinned Go module
// graph (hack/build-controlplane.sh, hack/build-cluster.sh, hack/build-kube-router.sh);
// images are imported, never pulled.
//
// Stop leaves nothing of the cluster behind: no process, container, shim, mount, network
// namespace, bridge, iptables rule, ipset or cgroup; Leftovers lists what would be.
package localcluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/agentplane/agentplane/config/policy"
	"github.com/agentplane/agentplane/internal/devtools/images"
)

// ErrNoRoot is why the cluster cannot start as another user.
var ErrNoRoot = errors.New("the local cluster needs root (containerd, the kubelet, mounts and iptables); run it as root")

// Options configure a cluster.
type Options struct {
	// BinDir holds etcd, kube-apiserver (make envtest-assets) and kubelet,
	// kube-controller-manager, kube-scheduler, kube-proxy, kube-router and pause (make
	// cluster-binaries); with gVisor's runsc and containerd-shim-runsc-v1 too (make gvisor),
	// the node offers the RuntimeClass GVisorRuntimeClass (gvisor.go).
	BinDir string
	// Dir is the cluster's state directory (default: a new temporary directory, removed by Stop).
	Dir string
	// NodeName is the real node's name (default "agentplane-node").
	NodeName string
	// CRDs are installed before Start returns, and with them the admission policies shipped
	// with them (config/policy).
	CRDs []*apiextensionsv1.CustomResourceDefinition
	// Images are image tarballs to import into the node's containerd. The sandbox image is
	// imported by Start from BinDir's pause.
	Images []string
	// Scheme for Client (default: client-go's).
	Scheme *k8sruntime.Scheme
	// SimulatedNodes is how many KWOK nodes join beside the real node (kwok.go; at most
	// MaxSimulatedNodes), named SimulatedNodeName(0..), tainted SimulatedNodeTaint.
	SimulatedNodes int
	// SimulatedNodeCapacity of each simulated node (DefaultSimulatedNodeCapacity).
	SimulatedNodeCapacity corev1.ResourceList
}

// Cluster is a running local cluster.
type Cluster struct {
	// Config and Client act as a cluster admin (system:masters).
	Config *rest.Config
	Client client.Client
	// Kubeconfig is the path of an admin kubeconfig (for kubectl and the components).
	Kubeconfig string
	// NodeName and NodeIP name the real node.
	NodeName, NodeIP string
	// Dir is the state directory; LogDir holds each component's log.
	Dir, LogDir string

	opts                  Options
	certDir               string
	sock, cniConf, caFile string
	containerdRoot        string
	ownDir                bool
	env                   *envtest.Environment
	containerd, kubelet   *proc
	kcm, scheduler, proxy *proc
	netpol                *proc
	kwok                  *proc
	gvisor                *gvisorRuntime
	dns                   *clusterDNS
	stopProvisioner       context.CancelFunc
	provisionerDone       chan struct{}
	baseline              Baseline
	unlock                func()
}

// Start starts a cluster and returns once its node is Ready and its default StorageClass
// exists. On error everything started is stopped again.
func Start(ctx context.Context, o Options) (_ *Cluster, err error) {
	if os.Geteuid() != 0 {
		return nil, ErrNoRoot
	}
	if err := o.complete(); err != nil {
		return nil, err
	}
	ip, err := nodeIP()
	if err != nil {
		return nil, err
	}
	unlock, err := Lock()
	if err != nil {
		return nil, err
	}
	c := &Cluster{opts: o, NodeName: o.NodeName, NodeIP: ip, unlock: unlock}
	defer func() {
		if err != nil {
			if c.LogDir != "" {
				err = fmt.Errorf("local cluster (logs in %s): %w", c.LogDir, err)
			}
			c.ownDir = false // keep the logs
			_ = c.Stop()
		}
	}()
	if err := c.makeDirs(); err != nil {
		return nil, err
	}
	if err := c.startComponents(ctx); err != nil {
		return nil, err
	}
	// Pods need their namespace's default ServiceAccount, which the controller manager creates.
	if err := waitFor(ctx, "the default ServiceAccount", time.Minute, c.kcm, func() error {
		return c.Client.Get(ctx, client.ObjectKey{Namespace: "default", Name: "default"}, &corev1.ServiceAccount{})
	}); err != nil {
		return nil, err
	}
	return c, nil
}

// complete fills in o's defaults and checks it, and that the binaries it needs are in
// its BinDir.
func (o *Options) complete() error {
	if o.NodeName == "" {
		o.NodeName = "agentplane-node"
	}
	if o.Scheme == nil {
		o.Scheme = clientgoscheme.Scheme
	}
	if o.SimulatedNodes < 0 || o.SimulatedNodes > MaxSimulatedNodes {
		return fmt.Errorf("local cluster: %d simulated nodes, want 0 to %d", o.SimulatedNodes, MaxSimulatedNodes)
	}
	need := []string{"etcd", "kube-apiserver", "kubelet", "kube-controller-manager", "kube-scheduler", "kube-proxy", "kube-router", "pause"}
	if o.SimulatedNodes > 0 {
		need = append(need, kwokFiles...)
	}
	for _, b := range need {
		if _, err := os.Stat(filepath.Join(o.BinDir, b)); err != nil {
			return fmt.Errorf("local cluster: %s is missing from %s (make envtest-assets cluster-binaries): %w", b, o.BinDir, err)
		}
	}
	return nil
}

// makeDirs makes the cluster's dir (a temporary one, its own, unless Options.Dir names one),
// its logs, CNI config and containerd dirs, and writes its CNI config.
func (c *Cluster) makeDirs() error {
	if c.opts.Dir == "" {
		var err error
		if c.Dir, err = os.MkdirTemp("", "agentplane-cluster-"); err != nil {
			return err
		}
		c.ownDir = true
	} else {
		c.Dir = c.opts.Dir
	}
	c.LogDir = filepath.Join(c.Dir, "logs")
	c.sock = filepath.Join(c.Dir, "containerd.sock")
	c.cniConf = filepath.Join(c.Dir, "cni")
	c.containerdRoot = filepath.Join(c.Dir, "containerd")
	c.baseline = TakeBaseline()
	for _, d := range []string{c.LogDir, c.cniConf, c.containerdRoot} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	return os.WriteFile(filepath.Join(c.cniConf, "10-agentplane.conflist"), []byte(cniConfig(filepath.Join(c.Dir, "cni-ipam"))), 0o644)
}

// startComponents starts the cluster's parts in order: containerd (with the images), the
// control plane, DNS, the controllers, the kubelet, kube-proxy, network policies, the volume
// provisioner and, when asked for, the simulated nodes.
func (c *Cluster) startComponents(ctx context.Context) error {
	if err := c.startContainerd(ctx); err != nil {
		return err
	}
	if err := c.importImages(ctx); err != nil {
		return err
	}
	if err := c.startControlPlane(); err != nil {
		return err
	}
	if c.gvisor != nil {
		if err := c.createGVisorRuntimeClass(ctx); err != nil {
			return err
		}
	}
	var err error
	if c.dns, err = startDNS(c.Client, c.NodeIP); err != nil {
		return err
	}
	if err := c.publishDNS(ctx); err != nil {
		return err
	}
	if err := c.startControllers(); err != nil {
		return err
	}
	if err := c.startKubelet(ctx); err != nil {
		return err
	}
	if err := c.startKubeProxy(ctx); err != nil {
		return err
	}
	if err := c.startNetworkPolicies(ctx); err != nil {
		return err
	}
	if err := c.startProvisioner(ctx); err != nil {
		return err
	}
	if c.opts.SimulatedNodes > 0 {
		return c.startKwok(ctx)
	}
	return nil
}

// startControlPlane starts etcd and kube-apiserver on the node's address, with the
// ServiceAccount admission plugin on (pods of a deployment get their tokens).
func (c *Cluster) startControlPlane() error {
	c.env = &envtest.Environment{
		BinaryAssetsDirectory: c.opts.BinDir,
		CRDs:                  c.opts.CRDs,
		Scheme:                c.opts.Scheme,
	}
	api := c.env.ControlPlane.GetAPIServer()
	port, err := freePort(c.NodeIP)
	if err != nil {
		return err
	}
	// Pods reach the API server through the `kubernetes` Service, whose endpoint is the
	// address it serves on: the node's, not loopback.
	api.SecureServing.Address, api.SecureServing.Port = c.NodeIP, strconv.Itoa(port)
	api.CertDir = filepath.Join(c.Dir, "pki")
	if api.SecureServing.CA, err = writeServingCerts(api.CertDir, c.NodeIP); err != nil {
		return err
	}
	api.Configure().
		Set("service-cluster-ip-range", ServiceCIDR).
		Set("authorization-mode", "Node,RBAC").
		// The node's name does not resolve on this machine; its address does (exec, logs).
		Set("kubelet-preferred-address-types", "InternalIP,Hostname").
		Disable("disable-admission-plugins")
	cfg, err := c.env.Start()
	if err != nil {
		return fmt.Errorf("control plane: %w", err)
	}
	c.Config = cfg
	if len(c.opts.CRDs) > 0 {
		// The admission policies shipped with the CRDs (config/default installs both).
		if err := policy.Install(context.Background(), cfg); err != nil {
			return err
		}
	}
	if c.Client, err = client.New(cfg, client.Options{Scheme: c.opts.Scheme}); err != nil {
		return err
	}
	admin, err := c.env.AddUser(envtest.User{Name: "agentplane-admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return err
	}
	kc, err := admin.KubeConfig()
	if err != nil {
		return err
	}
	c.Kubeconfig = filepath.Join(c.Dir, "kubeconfig")
	if err := os.WriteFile(c.Kubeconfig, kc, 0o600); err != nil {
		return err
	}
	c.certDir = api.CertDir
	c.caFile = filepath.Join(c.Dir, "ca.crt")
	return os.WriteFile(c.caFile, api.SecureServing.CA, 0o644)
}

// importImages imports the sandbox image and Options.Images.
func (c *Cluster) importImages(ctx context.Context) error {
	spec, err := images.PauseSpec(c.bin("pause"))
	if err != nil {
		return err
	}
	pause, err := images.Ensure(images.CacheDir(), spec)
	if err != nil {
		return err
	}
	for _, f := range append([]string{pause}, c.opts.Images...) {
		if err := c.Import(ctx, f); err != nil {
			return err
		}
	}
	return nil
}

// Stop drains the node, stops every component and removes what they left (see the package
// comment). It returns what could not be removed.
func (c *Cluster) Stop() error {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if c.unlock != nil {
		defer c.unlock()
	}
	var errs []error
	// Controllers first, so nothing recreates the pods the drain deletes.
	c.kcm.stop(10 * time.Second)
	c.scheduler.stop(10 * time.Second)
	if c.kubelet != nil && !c.kubelet.exited() && c.Client != nil {
		if err := c.drain(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	c.kubelet.stop(15 * time.Second)
	c.kwok.stop(10 * time.Second)
	// The firewall goes first: its syncs restore the whole filter table, and one racing
	// kube-proxy's cleanup put back the jumps to the chains the cleanup was deleting
	// ("CHAIN_DEL failed (Device or resource busy)").
	c.stopNetworkPolicies()
	if err := c.stopKubeProxy(ctx); err != nil {
		errs = append(errs, err)
	}
	c.dns.stop()
	if c.stopProvisioner != nil {
		c.stopProvisioner()
		<-c.provisionerDone
	}
	if c.containerd != nil && !c.containerd.exited() {
		if err := c.removeContainers(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	c.containerd.stop(15 * time.Second)
	if c.env != nil {
		if err := c.env.Stop(); err != nil {
			errs = append(errs, err)
		}
	}
	if c.Dir == "" {
		return errors.Join(errs...) // it never had a directory: nothing of it to sweep
	}
	errs = append(errs, c.sweep(ctx)...)
	if left := c.Leftovers(); len(left) > 0 {
		errs = append(errs, fmt.Errorf("left behind: %v", left))
	}
	if c.ownDir && len(errs) == 0 {
		if err := os.RemoveAll(c.Dir); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
