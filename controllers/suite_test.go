package controllers_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/agentplane/agentplane/controllers"
	"github.com/agentplane/agentplane/internal/devtools/testenv"
	"github.com/agentplane/agentplane/internal/devtools/testenv/kubeenv"
)

var (
	env       *kubeenv.Env
	k8sClient client.Client
	ctx       context.Context
	cancel    context.CancelFunc
)

func TestControllers(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Controllers Suite")
}

var _ = BeforeSuite(func() {
	logf.SetLogger(zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true)))
	// CI machines are small and busy: give asynchronous assertions room.
	SetDefaultEventuallyTimeout(testenv.EventBound)
	SetDefaultEventuallyPollingInterval(100 * time.Millisecond)
	ctx, cancel = context.WithCancel(context.Background())
	var err error
	env, err = kubeenv.Start()
	Expect(err).NotTo(HaveOccurred())
	k8sClient = env.Client
	Expect(installGatewayAPI()).To(Succeed())
})

// newManager returns a manager on the test control plane with the field indexes registered
// as the platform registers them; opts adjust its options.
func newManager(opts ...func(*ctrl.Options)) ctrl.Manager {
	o := ctrl.Options{
		Scheme: env.Scheme, Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0",
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	}
	for _, f := range opts {
		f(&o)
	}
	mgr, err := ctrl.NewManager(env.Config, o)
	Expect(err).NotTo(HaveOccurred())
	Expect(controllers.SetupIndexes(ctx, mgr.GetFieldIndexer())).To(Succeed())
	return mgr
}

// startManager runs mgr until the returned func is called; that func waits for it to stop.
func startManager(mgr ctrl.Manager) func() {
	mctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer GinkgoRecover()
		defer close(done)
		Expect(mgr.Start(mctx)).To(Succeed())
	}()
	return func() { stop(); <-done }
}

var _ = AfterSuite(func() {
	cancel()
	if env != nil {
		Expect(env.Stop()).To(Succeed())
	}
})
