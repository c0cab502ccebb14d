package gen

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/agentplane/agentplane/internal/devtools/testenv"
)

// Options say where the chart comes from and goes.
type Options struct {
	// Config is the kustomize tree (default/ and crd/bases/ under it).
	Config string
	// Monitoring is the directory of the monitoring objects and dashboards/*.json (absent: none).
	Monitoring string
	// Out is the chart directory, replaced as a whole.
	Out string
	// Version is the chart's version and appVersion.
	Version string
	// Kubectl renders the kustomize tree (kubectl kustomize).
	Kubectl string
}

// chart is the chart being written: file path (relative to the chart dir) -> content.
type chart map[string][]byte

// Run writes the chart.
func Run(o Options) error {
	raw, err := exec.Command(o.Kubectl, "kustomize", filepath.Join(o.Config, "default")).Output()
	if err != nil {
		return fmt.Errorf("kubectl kustomize %s/default: %w", o.Config, stderrOf(err))
	}
	objs, err := testenv.DecodeManifests(raw)
	if err != nil {
		return err
	}
	c := chart{}
	if err := c.addStatic(o.Version); err != nil {
		return err
	}
	ncrd, err := c.addCRDs(filepath.Join(o.Config, "crd", "bases"))
	if err != nil {
		return err
	}
	var values *valuesData
	for _, u := range objs {
		switch u.GetKind() {
		case "Namespace": // helm install --create-namespace (or an existing namespace)
		case "CustomResourceDefinition":
			ncrd--
		case "Deployment":
			if values != nil {
				return fmt.Errorf("more than one Deployment in %s/default", o.Config)
			}
			tpl, v, err := deploymentTemplate(u)
			if err != nil {
				return err
			}
			values = v
			c[templateName(u)] = tpl
		default:
			tpl, err := objectTemplate(u)
			if err != nil {
				return err
			}
			if k := u.GetKind(); k == "MutatingAdmissionPolicy" || k == "MutatingAdmissionPolicyBinding" {
				// Shipped with the CRDs (config/policy): behind crds.install with them.
				tpl = []byte("{{- if .Values.crds.install }}\n" + string(tpl) + "{{- end }}\n")
			}
			c[templateName(u)] = tpl
		}
	}
	if ncrd != 0 {
		return fmt.Errorf("config/default renders a different set of CRDs than %s/crd/bases", o.Config)
	}
	if values == nil {
		return fmt.Errorf("no Deployment in %s/default", o.Config)
	}
	if err := c.addValues(values); err != nil {
		return err
	}
	if err := c.addMonitoring(o.Monitoring); err != nil {
		return err
	}
	if err := c.addReadme(); err != nil {
		return err
	}
	return c.write(o.Out)
}

func templateName(u *unstructured.Unstructured) string {
	return filepath.Join("templates", fmt.Sprintf("%s-%s.yaml", lower(u.GetKind()), u.GetName()))
}

// write replaces dir with the chart.
func (c chart) write(dir string) error {
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	for name, data := range c {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			return err
		}
	}
	return nil
}

func stderrOf(err error) error {
	if ee := (*exec.ExitError)(nil); errors.As(err, &ee) && len(ee.Stderr) > 0 {
		return fmt.Errorf("%w: %s", err, ee.Stderr)
	}
	return err
}
