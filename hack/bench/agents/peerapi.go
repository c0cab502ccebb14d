package main

// Peer mode's view of the API server: the requests it answered, and the removal of the peer's
// objects once its manager stopped.

import (
	"context"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
)

var metricLabel = regexp.MustCompile(`(\w+)="([^"]*)"`)

// apiserverRequests reads the API server's apiserver_request_total, summed by "VERB
// resource[/subresource]".
func apiserverRequests(ctx context.Context, cfg *rest.Config) (map[string]float64, error) {
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, err
	}
	raw, err := dc.RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("the API server's metrics: %w", err)
	}
	out := map[string]float64{}
	for _, line := range strings.Split(string(raw), "\n") {
		if !strings.HasPrefix(line, "apiserver_request_total{") {
			continue
		}
		end := strings.LastIndexByte(line, '}')
		v, err := strconv.ParseFloat(strings.TrimSpace(line[end+1:]), 64)
		if err != nil {
			return nil, fmt.Errorf("metrics line %q: %w", line, err)
		}
		labels := map[string]string{}
		for _, m := range metricLabel.FindAllStringSubmatch(line[:end], -1) {
			labels[m[1]] = m[2]
		}
		key := labels["verb"] + " " + labels["resource"]
		if labels["subresource"] != "" {
			key += "/" + labels["subresource"]
		}
		out[key] += v
	}
	return out, nil
}

type keyCount struct {
	key string
	n   float64
}

// peerRequestCount is the API server's requests between before and after less the
// benchmark's own (own) and less those the API server makes itself (internal: the
// IPAddress of each Service's cluster IP, its leases; the peer takes no lease), in all and
// the ten most frequent.
func peerRequestCount(before, after map[string]float64, own *requestCounter) (total, internal float64, top []keyCount) {
	own.mu.Lock()
	defer own.mu.Unlock()
	for k, v := range after {
		d := v - before[k] - float64(own.counts[k])
		_, resource, _ := strings.Cut(k, " ")
		resource, _, _ = strings.Cut(resource, "/")
		switch {
		case d <= 0:
		case resource == "ipaddresses" || resource == "leases":
			internal += d
		default:
			total += d
			top = append(top, keyCount{k, d})
		}
	}
	sort.Slice(top, func(i, j int) bool { return top[i].n > top[j].n })
	return total, internal, top[:min(len(top), 10)]
}

// removeNamespaced deletes every object of every namespaced kind in namespaces (their
// finalizers dropped first: no controller runs for them any more) and says how many of each
// kind the first namespace held, per instance.
func removeNamespaced(ctx context.Context, cfg *rest.Config, namespaces ...string) (string, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.WarningHandler = rest.NoWarnings{} // v1 Endpoints is deprecated: listed all the same
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return "", err
	}
	mc, err := metadata.NewForConfig(cfg)
	if err != nil {
		return "", err
	}
	lists, err := dc.ServerPreferredNamespacedResources()
	if err != nil {
		return "", err
	}
	counts := map[string]int{}
	for _, l := range lists {
		gv, err := schema.ParseGroupVersion(l.GroupVersion)
		if err != nil {
			return "", err
		}
		for _, r := range l.APIResources {
			if !hasVerbs(r.Verbs, "list", "delete") {
				continue
			}
			res := mc.Resource(gv.WithResource(r.Name))
			for i, ns := range namespaces {
				objs, err := res.Namespace(ns).List(ctx, metav1.ListOptions{})
				if err != nil {
					return "", fmt.Errorf("list %s: %w", r.Name, err)
				}
				if i == 0 && len(objs.Items) > 0 && r.Name != "events" {
					counts[r.Name] = len(objs.Items)
				}
				err = parallel(8, len(objs.Items), func(j int) error {
					o := res.Namespace(ns)
					name := objs.Items[j].Name
					if len(objs.Items[j].Finalizers) > 0 {
						if _, err := o.Patch(ctx, name, types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{}); err != nil && !apierrors.IsNotFound(err) {
							return err
						}
					}
					if err := o.Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
						return err
					}
					return nil
				})
				if err != nil {
					return "", fmt.Errorf("delete %s: %w", r.Name, err)
				}
			}
		}
	}
	instances := max(counts["openclawinstances"], 1)
	var out []string
	for k, v := range counts {
		out = append(out, fmt.Sprintf("%s %.2g", k, float64(v)/float64(instances)))
	}
	sort.Strings(out)
	return strings.Join(out, ", "), nil
}

func hasVerbs(verbs metav1.Verbs, want ...string) bool {
	for _, w := range want {
		found := false
		for _, v := range verbs {
			found = found || v == w
		}
		if !found {
			return false
		}
	}
	return true
}
