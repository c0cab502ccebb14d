// Package policy holds the admission policies agentplane ships with its CRDs as Go values: the
// YAML of this directory (config/default includes it) embedded in the binary, named as
// config/default names them (agentplane-<name>). The test and dev control planes install them
// with the CRDs (Install), so they run as a cluster with the deploy manifests does.
package policy

import (
	"bytes"
	"context"
	"embed"
	"fmt"
	"io/fs"
	"sort"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

//go:embed *.yaml
var files embed.FS

// Prefix is config/default's namePrefix, which the deployed policies carry.
const Prefix = "agentplane-"

// Policies are the MutatingAdmissionPolicies and their bindings of this directory, in file
// order, named with Prefix.
type Policies struct {
	Mutating []*admissionregistrationv1.MutatingAdmissionPolicy
	Bindings []*admissionregistrationv1.MutatingAdmissionPolicyBinding
}

// Load decodes the policies of this directory.
func Load() (*Policies, error) {
	names, err := fs.Glob(files, "*.yaml")
	if err != nil {
		return nil, err
	}
	sort.Strings(names)
	out := &Policies{}
	for _, n := range names {
		if n == "kustomization.yaml" {
			continue
		}
		raw, err := files.ReadFile(n)
		if err != nil {
			return nil, err
		}
		for _, doc := range bytes.Split(raw, []byte("\n---\n")) {
			var tm metav1.TypeMeta
			if err := yaml.Unmarshal(doc, &tm); err != nil {
				return nil, fmt.Errorf("%s: %w", n, err)
			}
			switch tm.Kind {
			case "MutatingAdmissionPolicy":
				p := &admissionregistrationv1.MutatingAdmissionPolicy{}
				if err := yaml.UnmarshalStrict(doc, p); err != nil {
					return nil, fmt.Errorf("%s: %w", n, err)
				}
				p.Name = Prefix + p.Name
				out.Mutating = append(out.Mutating, p)
			case "MutatingAdmissionPolicyBinding":
				b := &admissionregistrationv1.MutatingAdmissionPolicyBinding{}
				if err := yaml.UnmarshalStrict(doc, b); err != nil {
					return nil, fmt.Errorf("%s: %w", n, err)
				}
				b.Name, b.Spec.PolicyName = Prefix+b.Name, Prefix+b.Spec.PolicyName
				out.Bindings = append(out.Bindings, b)
			default:
				return nil, fmt.Errorf("%s: unexpected kind %q", n, tm.Kind)
			}
		}
	}
	return out, nil
}

// Objects are the policies and their bindings as objects to create.
func (p *Policies) Objects() []client.Object {
	var out []client.Object
	for _, m := range p.Mutating {
		out = append(out, m.DeepCopy())
	}
	for _, b := range p.Bindings {
		out = append(out, b.DeepCopy())
	}
	return out
}

// Install creates the policies and bindings the API server of cfg lacks (those there are left
// as they are, as the CRDs are) and waits until the API server applies them: a dry-run create
// of an Agent in the namespace "default" comes back with the finalizer the policy adds. The
// CRDs must be installed first. An API server that does not serve
// admissionregistration.k8s.io/v1's MutatingAdmissionPolicy gets none and no error: the
// controllers do without (the Agent controller adds its finalizer itself).
func Install(ctx context.Context, cfg *rest.Config) error {
	p, err := Load()
	if err != nil {
		return err
	}
	s := k8sruntime.NewScheme()
	if err := admissionregistrationv1.AddToScheme(s); err != nil {
		return err
	}
	c, err := client.New(cfg, client.Options{Scheme: s})
	if err != nil {
		return err
	}
	for _, o := range p.Objects() {
		err := c.Create(ctx, o)
		switch {
		case err == nil, apierrors.IsAlreadyExists(err):
		case meta.IsNoMatchError(err), apierrors.IsNotFound(err):
			// An API server before Kubernetes 1.36 (or with the API turned off): no policies,
			// and the controller adds the finalizer itself.
			return nil
		default:
			return fmt.Errorf("install %T %s: %w", o, o.GetName(), err)
		}
	}
	// The admission plugin sees new policies through an informer: wait until it applies them.
	var last error
	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		probe := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "agentplane.io/v1alpha1", "kind": "Agent",
			"metadata": map[string]any{"generateName": "policy-probe-", "namespace": "default"},
			"spec":     map[string]any{"displayName": "policy probe"},
		}}
		if last = c.Create(ctx, probe, client.DryRunAll); last != nil {
			return false, nil
		}
		for _, f := range probe.GetFinalizers() {
			if f == AgentFinalizer {
				return true, nil
			}
		}
		last = fmt.Errorf("a dry-run Agent came back without the finalizer %s", AgentFinalizer)
		return false, nil
	})
	if err != nil && last != nil {
		return fmt.Errorf("wait for the admission policies to apply: %w (%v)", last, err)
	}
	return err
}

// AgentFinalizer is the finalizer the agent-finalizer policy adds (api/v1alpha1's
// AgentFinalizer; this package does not import the API types).
const AgentFinalizer = "agentplane.io/agent"
