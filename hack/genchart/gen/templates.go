package gen

import (
	"fmt"
	"regexp"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// Objects are turned into templates by putting placeholders into them, marshalling them and
// replacing the placeholders with template text:
//   - a value "__V_NAME__" is replaced in place (values[NAME]);
//   - a map key "__P_NAME__" or a list item "- __P_NAME__" is replaced by the lines
//     blocks[NAME] returns for that line's indentation;
//   - a value "__Y_NAME__" of a map key becomes .Values.NAME (lower-cased) as YAML under the key.
var (
	valueRE = regexp.MustCompile(`__V_([A-Z]+)__`)
	blockRE = regexp.MustCompile(`(?m)^( *)(- )?__P_([A-Z]+)__(: .*)?$`)
	yamlRE  = regexp.MustCompile(`(?m)^( *)(- )?([A-Za-z]+): __Y_([A-Z]+)__$`)
)

var values = map[string]string{
	"NS":         `{{ .Release.Namespace }}`,
	"IMAGE":      `{{ include "agentplane.image" . | quote }}`,
	"PULLPOLICY": `{{ .Values.image.pullPolicy }}`,
	"REPLICAS":   `{{ .Values.replicaCount }}`,
}

var blocks = map[string]func(ind string) string{
	"LABELS": func(ind string) string {
		return fmt.Sprintf(`%s{{- include "agentplane.labels" . | nindent %d }}`, ind, len(ind))
	},
	"ARGS": func(ind string) string {
		return fmt.Sprintf(`%s{{- include "agentplane.managerArgs" . | nindent %d }}`, ind, len(ind))
	},
	"VOLUMEMOUNTS": func(ind string) string {
		return fmt.Sprintf(`%s{{- include "agentplane.volumeMounts" . | trim | nindent %d }}`, ind, len(ind))
	},
	"VOLUMES": func(ind string) string {
		return fmt.Sprintf(`%s{{- include "agentplane.volumes" . | trim | nindent %d }}`, ind, len(ind))
	},
	// podAnnotations and the checksums of the config the manager reads at start.
	"PODANNOTATIONS": func(ind string) string {
		return fmt.Sprintf("%s{{- with include \"agentplane.podAnnotations\" . }}\n%sannotations:\n%s  {{- . | nindent %d }}\n%s{{- end }}",
			ind, ind, ind, len(ind)+2, ind)
	},
	"SCHEDULING": func(ind string) string {
		return strings.Join([]string{
			withBlock(ind, "nodeSelector", "nodeSelector"),
			withBlock(ind, "tolerations", "tolerations"),
			withBlock(ind, "affinity", "affinity"),
		}, "\n")
	},
	// The claim's directory belongs to root on most provisioners: the group makes it the
	// manager's (config/local does the same).
	"FSGROUP": func(ind string) string {
		return fmt.Sprintf("%s{{- if eq .Values.storage.type \"pvc\" }}\n%sfsGroup: 65532\n%s{{- end }}", ind, ind, ind)
	},
}

func withBlock(ind, value, key string) string {
	return fmt.Sprintf("%s{{- with .Values.%s }}\n%s%s:\n%s  {{- toYaml . | nindent %d }}\n%s{{- end }}",
		ind, value, ind, key, ind, len(ind)+2, ind)
}

// render marshals an object with placeholders and replaces them.
func render(u *unstructured.Unstructured, comment string) ([]byte, error) {
	out, err := yaml.Marshal(u.Object)
	if err != nil {
		return nil, err
	}
	s := string(out)
	var missing []string
	s = blockRE.ReplaceAllStringFunc(s, func(line string) string {
		m := blockRE.FindStringSubmatch(line)
		f, ok := blocks[m[3]]
		if !ok {
			missing = append(missing, m[3])
			return line
		}
		if m[2] != "" && m[4] != "" {
			// The first key of a list item's map: the block's first line takes the dash.
			return m[1] + "- " + strings.TrimPrefix(f(m[1]+"  "), m[1]+"  ")
		}
		return f(m[1])
	})
	s = yamlRE.ReplaceAllStringFunc(s, func(line string) string {
		m := yamlRE.FindStringSubmatch(line)
		ind := m[1]
		if m[2] != "" {
			ind += "  "
		}
		return fmt.Sprintf("%s%s%s:\n%s  {{- toYaml .Values.%s | nindent %d }}", m[1], m[2], m[3], ind, lower(m[4]), len(ind)+2)
	})
	s = valueRE.ReplaceAllStringFunc(s, func(v string) string {
		name := valueRE.FindStringSubmatch(v)[1]
		r, ok := values[name]
		if !ok {
			missing = append(missing, name)
		}
		return r
	})
	if len(missing) > 0 {
		return nil, fmt.Errorf("unknown placeholders %v", missing)
	}
	return []byte("# " + comment + "\n" + s), nil
}

// commonPlaceholders puts the release namespace and labels into an object.
func commonPlaceholders(u *unstructured.Unstructured) error {
	if u.GetNamespace() != "" {
		u.SetNamespace("__V_NS__")
	}
	labels := map[string]any{}
	for k, v := range u.GetLabels() {
		if k != "app.kubernetes.io/name" { // the chart's labels carry it
			labels[k] = v
		}
	}
	labels["__P_LABELS__"] = ""
	if err := unstructured.SetNestedField(u.Object, labels, "metadata", "labels"); err != nil {
		return err
	}
	// Bindings name the release's ServiceAccount in the release namespace.
	subjects, _, _ := unstructured.NestedSlice(u.Object, "subjects")
	for _, s := range subjects {
		if m, ok := s.(map[string]any); ok && m["namespace"] != nil {
			m["namespace"] = "__V_NS__"
		}
	}
	if subjects != nil {
		if err := unstructured.SetNestedSlice(u.Object, subjects, "subjects"); err != nil {
			return err
		}
	}
	switch u.GetKind() {
	case "FlowSchema":
		return flowSchemaPlaceholders(u)
	case "MutatingAdmissionPolicy", "MutatingAdmissionPolicyBinding":
		// Cluster-scoped, but kustomize's schema does not know admissionregistration.k8s.io/v1's
		// admission policies and gives them config/default's namespace: it is dropped.
		u.SetNamespace("")
	}
	return nil
}

// flowSchemaPlaceholders makes a FlowSchema of config/default match the release's
// ServiceAccount in the release namespace: its ServiceAccount subjects' namespace and its
// resource rules' namespaces (config/default's replacements set both to the system namespace)
// become the release namespace. A FlowSchema is cluster-scoped, but kustomize, whose schema
// knows only flowcontrol.apiserver.k8s.io/v1beta1, gives it config/default's namespace: it
// is dropped.
func flowSchemaPlaceholders(u *unstructured.Unstructured) error {
	u.SetNamespace("")
	rules, _, err := unstructured.NestedSlice(u.Object, "spec", "rules")
	if err != nil {
		return err
	}
	for _, r := range rules {
		rule, ok := r.(map[string]any)
		if !ok {
			continue
		}
		subjects, _ := rule["subjects"].([]any)
		for _, s := range subjects {
			if sa, ok := s.(map[string]any)["serviceAccount"].(map[string]any); ok {
				sa["namespace"] = "__V_NS__"
			}
		}
		resourceRules, _ := rule["resourceRules"].([]any)
		for _, rr := range resourceRules {
			m, _ := rr.(map[string]any)
			namespaces, _ := m["namespaces"].([]any)
			for i, n := range namespaces {
				if n != "*" {
					namespaces[i] = "__V_NS__"
				}
			}
		}
	}
	return unstructured.SetNestedSlice(u.Object, rules, "spec", "rules")
}

// objectTemplate is an object of config/default in the release namespace with the chart's labels.
func objectTemplate(u *unstructured.Unstructured) ([]byte, error) {
	u = u.DeepCopy()
	if err := commonPlaceholders(u); err != nil {
		return nil, err
	}
	return render(u, fmt.Sprintf("%s %s from config/default (hack/genchart).", u.GetKind(), u.GetName()))
}

// valuesData is what values.yaml takes from config/default's Deployment.
type valuesData struct {
	ImageRepository, ImageTag string
	Replicas                  int64
	Resources                 string
}

// deploymentTemplate is the manager Deployment of config/default with the image, replicas,
// resources, scheduling, pod annotations, flags and volumes from the values.
func deploymentTemplate(u *unstructured.Unstructured) ([]byte, *valuesData, error) {
	u = u.DeepCopy()
	if err := commonPlaceholders(u); err != nil {
		return nil, nil, err
	}
	v := &valuesData{}
	switch r := u.Object["spec"].(map[string]any)["replicas"].(type) {
	case int64:
		v.Replicas = r
	case float64:
		v.Replicas = int64(r)
	default:
		return nil, nil, fmt.Errorf("the manager Deployment's replicas %v (%T)", r, r)
	}
	if err := unstructured.SetNestedField(u.Object, "__V_REPLICAS__", "spec", "replicas"); err != nil {
		return nil, nil, err
	}
	pod, _, _ := unstructured.NestedMap(u.Object, "spec", "template", "spec")
	containers, _, _ := unstructured.NestedSlice(pod, "containers")
	if len(containers) != 1 {
		return nil, nil, fmt.Errorf("the manager Deployment has %d containers, want 1", len(containers))
	}
	c := containers[0].(map[string]any)
	image, _ := c["image"].(string)
	i := strings.LastIndex(image, ":")
	if i < 0 {
		return nil, nil, fmt.Errorf("manager image %q has no tag", image)
	}
	v.ImageRepository, v.ImageTag = image[:i], image[i+1:]
	c["image"], c["imagePullPolicy"] = "__V_IMAGE__", "__V_PULLPOLICY__"
	res, err := yaml.Marshal(c["resources"])
	if err != nil {
		return nil, nil, err
	}
	v.Resources = indent(string(res), "  ")
	c["resources"] = "__Y_RESOURCES__"
	c["args"] = append(c["args"].([]any), "__P_ARGS__")
	mounts, _ := c["volumeMounts"].([]any)
	c["volumeMounts"] = append(mounts, "__P_VOLUMEMOUNTS__")
	vols, _ := pod["volumes"].([]any)
	pod["volumes"] = append(vols, "__P_VOLUMES__")
	pod["containers"] = containers
	pod["__P_SCHEDULING__"] = ""
	sc, _ := pod["securityContext"].(map[string]any)
	if sc == nil {
		sc = map[string]any{}
	}
	sc["__P_FSGROUP__"] = ""
	pod["securityContext"] = sc
	if err := unstructured.SetNestedMap(u.Object, pod, "spec", "template", "spec"); err != nil {
		return nil, nil, err
	}
	if err := unstructured.SetNestedField(u.Object, "", "spec", "template", "metadata", "__P_PODANNOTATIONS__"); err != nil {
		return nil, nil, err
	}
	out, err := render(u, "The manager Deployment of config/default (hack/genchart); flags, image, storage from the values.")
	return out, v, err
}

func indent(s, ind string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	for i, l := range lines {
		lines[i] = ind + l
	}
	return strings.Join(lines, "\n") + "\n"
}

func lower(s string) string { return strings.ToLower(s) }
