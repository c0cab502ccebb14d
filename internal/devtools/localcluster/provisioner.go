package localcluster

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/agentplane/agentplane/internal/adapters/loopfs"
)

// The default StorageClass and its provisioner.
const (
	StorageClass = "agentplane-local"
	Provisioner  = "agentplane.io/local-path"
	// annSelectedNode is where the scheduler names the node of a WaitForFirstConsumer claim.
	annSelectedNode  = "volume.kubernetes.io/selected-node"
	annProvisionedBy = "pv.kubernetes.io/provisioned-by"
)

// provisioner gives each claim of StorageClass a `local` PersistentVolume: a directory under
// root on the node the scheduler chose (the real node or a simulated one, whose pods never
// mount it). On the real node the directory is a filesystem of the claim's size (loopfs: an
// ext4 image beside it, loop-mounted), so a pod that fills its volume gets ENOSPC there, as
// on a cloud's disk, instead of taking the machine's. `local` volumes take the pod's fsGroup
// (hostPath ignores it), so the non-root gateway can write its home. A released volume's
// directory, image and object are deleted (reclaim policy Delete).
type provisioner struct {
	client client.Client
	root   string
	nodes  map[string]bool
	// real is the real node's name; tools make its volumes, unless this machine cannot mount
	// them (unsized says why: then they are plain directories, as on simulated nodes).
	real    string
	tools   loopfs.Tools
	unsized error
}

func (c *Cluster) startProvisioner(ctx context.Context) error {
	sc := &storagev1.StorageClass{
		ObjectMeta: metav1.ObjectMeta{
			Name:        StorageClass,
			Annotations: map[string]string{"storageclass.kubernetes.io/is-default-class": "true"},
		},
		Provisioner:       Provisioner,
		ReclaimPolicy:     ptr.To(corev1.PersistentVolumeReclaimDelete),
		VolumeBindingMode: ptr.To(storagev1.VolumeBindingWaitForFirstConsumer),
	}
	if err := c.Client.Create(ctx, sc); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	scheme := k8sruntime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return err
	}
	mgr, err := ctrl.NewManager(c.Config, ctrl.Options{Scheme: scheme, Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0",
		// A process may run one cluster after another (a test package, a benchmark); the
		// names are checked process-wide and would refuse the second cluster's provisioner.
		Controller: config.Controller{SkipNameValidation: ptr.To(true)}})
	if err != nil {
		return err
	}
	nodes := map[string]bool{c.NodeName: true}
	for i := range c.opts.SimulatedNodes {
		nodes[SimulatedNodeName(i)] = true
	}
	p := &provisioner{client: mgr.GetClient(), root: filepath.Join(c.Dir, "volumes"), nodes: nodes, real: c.NodeName}
	p.tools, p.unsized = loopfs.Find()
	if err := p.remount(); err != nil {
		return err
	}
	if err := ctrl.NewControllerManagedBy(mgr).Named("provision").For(&corev1.PersistentVolumeClaim{}).Complete(reconcile.Func(p.provision)); err != nil {
		return err
	}
	if err := ctrl.NewControllerManagedBy(mgr).Named("reclaim").For(&corev1.PersistentVolume{}).Complete(reconcile.Func(p.reclaim)); err != nil {
		return err
	}
	runCtx, cancel := context.WithCancel(context.Background())
	c.stopProvisioner, c.provisionerDone = cancel, make(chan struct{})
	go func() {
		defer close(c.provisionerDone)
		_ = mgr.Start(runCtx)
	}()
	return nil
}

// provision creates the volume of a pending claim of the class once its node is chosen.
func (p *provisioner) provision(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var pvc corev1.PersistentVolumeClaim
	if err := p.client.Get(ctx, req.NamespacedName, &pvc); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if pvc.Spec.VolumeName != "" || pvc.DeletionTimestamp != nil || ptr.Deref(pvc.Spec.StorageClassName, "") != StorageClass ||
		!p.nodes[pvc.Annotations[annSelectedNode]] {
		return ctrl.Result{}, nil
	}
	name := "pvc-" + string(pvc.UID)
	dir := filepath.Join(p.root, name)
	size := pvc.Spec.Resources.Requests[corev1.ResourceStorage]
	if err := p.makeVolume(dir, pvc.Annotations[annSelectedNode] == p.real, size.Value()); err != nil {
		return ctrl.Result{}, fmt.Errorf("provision %s/%s: %w", pvc.Namespace, pvc.Name, err)
	}
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{annProvisionedBy: Provisioner}},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: pvc.Spec.Resources.Requests[corev1.ResourceStorage]},
			AccessModes:                   pvc.Spec.AccessModes,
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimDelete,
			StorageClassName:              StorageClass,
			VolumeMode:                    pvc.Spec.VolumeMode,
			ClaimRef: &corev1.ObjectReference{
				Kind: "PersistentVolumeClaim", APIVersion: "v1",
				Namespace: pvc.Namespace, Name: pvc.Name, UID: pvc.UID,
			},
			PersistentVolumeSource: corev1.PersistentVolumeSource{Local: &corev1.LocalVolumeSource{Path: dir}},
			NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{
				NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{
					Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpIn, Values: []string{pvc.Annotations[annSelectedNode]},
				}}}},
			}},
		},
	}
	if err := p.client.Create(ctx, pv); err != nil && !apierrors.IsAlreadyExists(err) {
		return ctrl.Result{}, fmt.Errorf("provision %s/%s: %w", pvc.Namespace, pvc.Name, err)
	}
	return ctrl.Result{}, nil
}

// reclaim deletes a released volume of the provisioner: its data, then its object.
func (p *provisioner) reclaim(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var pv corev1.PersistentVolume
	if err := p.client.Get(ctx, req.NamespacedName, &pv); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if pv.Annotations[annProvisionedBy] != Provisioner || pv.Status.Phase != corev1.VolumeReleased ||
		pv.Spec.PersistentVolumeReclaimPolicy != corev1.PersistentVolumeReclaimDelete || pv.Spec.Local == nil {
		return ctrl.Result{}, nil
	}
	if filepath.Dir(pv.Spec.Local.Path) != p.root {
		return ctrl.Result{}, fmt.Errorf("volume %s is outside %s", pv.Name, p.root)
	}
	if err := loopfs.Unmount(pv.Spec.Local.Path); err != nil {
		return ctrl.Result{}, err
	}
	if err := os.RemoveAll(pv.Spec.Local.Path); err != nil {
		return ctrl.Result{}, err
	}
	if err := os.Remove(pv.Spec.Local.Path + imageSuffix); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return ctrl.Result{}, err
	}
	return ctrl.Result{}, client.IgnoreNotFound(p.client.Delete(ctx, &pv))
}

// imageSuffix names a volume's image beside its directory.
const imageSuffix = ".img"

// makeVolume makes dir, on the real node a filesystem of size bytes (when this machine can
// mount one: as root, with e2fsprogs).
func (p *provisioner) makeVolume(dir string, real bool, size int64) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if !real || p.unsized != nil || size <= 0 || loopfs.Mounted(dir) {
		return nil
	}
	if _, err := os.Stat(dir + imageSuffix); errors.Is(err, fs.ErrNotExist) {
		if err := p.tools.Make(dir+imageSuffix, size); err != nil {
			return err
		}
	}
	if err := p.mountImage(dir); err != nil {
		return err
	}
	return os.Chmod(dir, 0o755)
}

// mountImage mounts the image beside dir at dir, unless something is mounted there.
func (p *provisioner) mountImage(dir string) error {
	if loopfs.Mounted(dir) {
		return nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	return p.tools.Mount(dir+imageSuffix, dir)
}

// remount mounts again the volumes of a cluster dir that a stopped cluster left (its stop
// unmounts them; their images keep the data).
func (p *provisioner) remount() error {
	if p.unsized != nil {
		return nil
	}
	imgs, _ := filepath.Glob(filepath.Join(p.root, "pvc-*"+imageSuffix))
	for _, img := range imgs {
		if err := p.mountImage(strings.TrimSuffix(img, imageSuffix)); err != nil {
			return err
		}
	}
	return nil
}
