package history

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"
)

// Limits are what the models need to know of the platform: each workspace's agent limit.
type Limits struct {
	Agents map[string]int
}

// PartitionResult is the checker's verdict on one partition of the history.
type PartitionResult struct {
	Key     string
	Ops     int
	Verdict porcupine.CheckResult
	// Visualization and History are the files written for an illegal (or unknown) partition.
	Visualization, History string
}

// Result is the verdict on a whole history.
type Result struct {
	Partitions []PartitionResult
	// Unchecked counts operations no model covers.
	Unchecked int
}

// OK reports whether every partition is linearizable.
func (r Result) OK() bool {
	for _, p := range r.Partitions {
		if p.Verdict != porcupine.Ok {
			return false
		}
	}
	return true
}

// Violations are the partitions that are not linearizable (or could not be decided in time).
func (r Result) Violations() []PartitionResult {
	var out []PartitionResult
	for _, p := range r.Partitions {
		if p.Verdict != porcupine.Ok {
			out = append(out, p)
		}
	}
	return out
}

func (r Result) String() string {
	ops := 0
	for _, p := range r.Partitions {
		ops += p.Ops
	}
	return fmt.Sprintf("%d partitions, %d ops checked, %d unchecked, %d violations", len(r.Partitions), ops, r.Unchecked, len(r.Violations()))
}

// partitions are the keys of the models an op belongs to (none: unchecked). An op may belong
// to two: a domain create is checked against its subdomain's one holder and against its
// agent's limit of 5. Each partition is a projection of the one serial order the platform
// must have; checking them apart is a necessary condition, and each is small enough to decide.
func partitions(o Op) []string {
	switch o.Kind {
	case CreateAgent, DeleteAgent:
		return []string{"agents/" + o.Workspace}
	case CreateSecret, DeleteSecret:
		return []string{"secret/" + o.Workspace + "/" + o.Name}
	case CreateDomain, DeleteDomain:
		keys := []string{"subdomain/" + strings.ToLower(o.Name)}
		if o.Agent != "" {
			keys = append(keys, "domains/"+o.Workspace+"/"+o.Agent)
		}
		return keys
	case AttachSkill, DetachSkill:
		return []string{"skills/" + o.Workspace + "/" + o.Agent}
	case SetChannel, DeleteChannel:
		return []string{"channel/" + o.Workspace + "/" + o.Agent + "/" + o.Name}
	}
	return nil
}

// eventual: the op's effect may land after its answer. An agent's slot is released by the
// Agent controller's finalizer after DELETE answered; a domain delete answers 200 once the
// Domain controller's finalizer released its name and slot, 202 before. (A channel delete's
// 202 is modelled as a state of its own: "removing" is observable, as a 409 to a setup.)
func eventual(o Op) bool {
	return o.Kind == DeleteAgent && o.Status/100 == 2 || o.Kind == DeleteDomain && o.Status == 202
}

// EventualWithin bounds how long after its answer an eventual effect lands; 0 leaves it
// unbounded (the effect may land at any later point of the history).
var EventualWithin time.Duration

// Check checks each partition of ops against its model, and writes Porcupine's visualisation
// and the partition's ops (JSON) under outDir for each one that is not linearizable.
// timeout bounds each partition's check.
func Check(ops []Op, limits Limits, outDir string, timeout time.Duration) (Result, error) {
	parts := map[string][]porcupine.Operation{}
	var res Result
	for _, o := range ops {
		keys := partitions(o)
		if len(keys) == 0 {
			res.Unchecked++
			continue
		}
		ret := o.Return
		switch {
		case o.Ambiguous():
			ret = math.MaxInt64 // may take effect any time after its call, or never
		case eventual(o) && EventualWithin > 0:
			ret = o.Return + EventualWithin.Nanoseconds()
		case eventual(o):
			ret = math.MaxInt64
		}
		phases := []int{0}
		if o.Kind == DeleteChannel && o.Status == 200 {
			phases = []int{1, 2}
		}
		for _, key := range keys {
			for _, ph := range phases {
				parts[key] = append(parts[key], porcupine.Operation{
					ClientId: o.Client, Input: step{Op: o, eventual: eventual(o), phase: ph}, Call: o.Call, Return: ret,
				})
			}
		}
	}
	keys := make([]string, 0, len(parts))
	for k := range parts {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, key := range keys {
		model, err := modelFor(key, limits)
		if err != nil {
			return res, err
		}
		verdict, info := porcupine.CheckOperationsVerbose(model, parts[key], timeout)
		pr := PartitionResult{Key: key, Ops: len(parts[key]), Verdict: verdict}
		if verdict != porcupine.Ok && outDir != "" {
			if pr.Visualization, pr.History, err = save(outDir, key, model, info, parts[key]); err != nil {
				return res, err
			}
		}
		res.Partitions = append(res.Partitions, pr)
	}
	return res, nil
}

func modelFor(key string, limits Limits) (porcupine.Model, error) {
	kind, rest, _ := strings.Cut(key, "/")
	var nm porcupine.NondeterministicModel
	switch kind {
	case "agents":
		limit, ok := limits.Agents[rest]
		if !ok {
			return porcupine.Model{}, fmt.Errorf("no agent limit for workspace %s", rest)
		}
		nm = agentsModel(limit)
	case "secret":
		nm = holderModel(CreateSecret, DeleteSecret, errDuplicateSecret)
	case "subdomain":
		nm = holderModel(CreateDomain, DeleteDomain, errSubdomainTaken)
	case "domains":
		nm = domainSlotsModel()
	case "skills":
		nm = skillsModel()
	case "channel":
		nm = channelModel()
	default:
		return porcupine.Model{}, fmt.Errorf("no model for %s", key)
	}
	nm = withReleases(nm)
	return nm.ToModel(), nil
}

// save writes the visualisation and the ops of one partition.
func save(dir, key string, model porcupine.Model, info porcupine.LinearizationInfo, ops []porcupine.Operation) (string, string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", "", err
	}
	base := filepath.Join(dir, strings.NewReplacer("/", "_", ".", "_").Replace(key))
	html := base + ".html"
	if err := porcupine.VisualizePath(model, info, html); err != nil {
		return "", "", err
	}
	recorded := make([]Op, len(ops))
	for i, o := range ops {
		recorded[i] = o.Input.(step).Op
	}
	b, err := json.MarshalIndent(recorded, "", "  ")
	if err != nil {
		return "", "", err
	}
	hist := base + ".json"
	return html, hist, os.WriteFile(hist, b, 0o644)
}
