package stress

import (
	"errors"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/test/robustness/history"
)

// Traffic of TestHistoryIsLinearizable.
const (
	historyClients  = 16
	historyDuration = 30 * time.Second
	historyAgentMax = 3  // each workspace's agent limit
	historySkills   = 12 // skills installed in each workspace: two more than an agent may attach
)

// historySeeds are the short profile's fixed seeds; every run adds one random seed.
var historySeeds = []int64{1, 2}

// historyChannels are the channel types the traffic sets up and removes.
var historyChannels = []string{"telegram", "discord"}

// known are the objects the traffic created and may delete, by workspace.
type known struct {
	sync.Mutex
	agents  map[string][]string
	secrets map[string][][2]string // id, name
	domains map[string][][3]string // id, agent, subdomain
}

func take[T any](mu *sync.Mutex, m map[string][]T, ws string, rng *rand.Rand) (T, bool) {
	mu.Lock()
	defer mu.Unlock()
	var zero T
	l := m[ws]
	if len(l) == 0 {
		return zero, false
	}
	i := rng.Intn(len(l))
	v := l[i]
	m[ws] = append(l[:i:i], l[i+1:]...)
	return v, true
}

func keep[T any](mu *sync.Mutex, m map[string][]T, ws string, v T) {
	mu.Lock()
	defer mu.Unlock()
	m[ws] = append(m[ws], v)
}

// TestHistoryIsLinearizable drives 16 clients of random operations over two facade replicas
// (separate processes: the leader-elected manager with facade A, and facade B through a
// fault-injecting proxy) for a while: agents created and deleted against a limit, secrets with
// colliding names, domains from one pool of subdomains shared by three workspaces, skills
// attached and detached against the limit of 10, channels set up and removed. Meanwhile it
// injects at least three faults chosen at random (historyFaults). It then checks the whole
// recorded history against serial models with Porcupine (test/robustness/history): every
// answer must be explained by some serial order. Deletes of agents and domains are checked as
// taking effect some time after their answer (their finalizers release the slot and the
// name), a 5xx or no answer as maybe taking effect. On a violation the visualisation and the
// history are saved and their paths printed. Validators then check the final state
// (validateAfterTraffic).
//
// The short profile runs the fixed historySeeds and one random seed. AGENTPLANE_HISTORY_SEED
// runs that seed alone, AGENTPLANE_HISTORY_RUNS adds random seeds and
// AGENTPLANE_HISTORY_DURATION sets each run's traffic: `make test-robustness` runs the long
// profile.
func TestHistoryIsLinearizable(t *testing.T) {
	seeds := append(slices.Clone(historySeeds), time.Now().UnixNano())
	if s := os.Getenv("AGENTPLANE_HISTORY_RUNS"); s != "" {
		n, _ := strconv.Atoi(s)
		for i := 1; i < n; i++ {
			seeds = append(seeds, seeds[len(seeds)-1]+int64(i))
		}
	}
	if s := os.Getenv("AGENTPLANE_HISTORY_SEED"); s != "" {
		seed, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			t.Fatalf("AGENTPLANE_HISTORY_SEED=%q: %v", s, err)
		}
		seeds = []int64{seed}
	}
	duration := historyDuration
	if s := os.Getenv("AGENTPLANE_HISTORY_DURATION"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil {
			t.Fatalf("AGENTPLANE_HISTORY_DURATION=%q: %v", s, err)
		}
		duration = d
	}
	t.Logf("seeds %v (AGENTPLANE_HISTORY_SEED=<seed> reruns one)", seeds)
	c := startHistCluster(t)
	cids := make([]string, historySkills)
	for i := range cids {
		cids[i] = publish(fmt.Sprintf("hist-skill-%d", i), "1.0.0")
	}
	// The runs share the cluster and the test (not subtests): a process a fault restarts
	// belongs to the cluster, which stops the manager gracefully (its gateways with it) at the
	// end.
	for run, seed := range seeds {
		historyRun(t, c, seed, run, duration, cids)
	}
	c.stop(t)
}

// historyTraffic is what the clients of one run share.
type historyTraffic struct {
	c          *histCluster
	rec        *history.Recorder
	k          *known
	spaces     []string
	toks       map[string]string
	homes      map[string]string // the long-lived agent of each workspace: domains, skills, channels
	subdomains []string
	skills     []string // bundle CIDs installed in every workspace
	// creates numbers the agents' names, so that each create's agent can be found by its name
	// (resolveOutcomes).
	creates atomic.Int64
}

// historyRun is one run of TestHistoryIsLinearizable in workspaces of its own.
func historyRun(t *testing.T, c *histCluster, seed int64, run int, duration time.Duration, skills []string) {
	t.Logf("run %d: seed %d (AGENTPLANE_HISTORY_SEED=%d reruns it)", run, seed, seed)
	failed := t.Failed()
	defer func() {
		if t.Failed() && !failed {
			t.Logf("run %d failed: AGENTPLANE_HISTORY_SEED=%d reruns it", run, seed)
		}
	}()
	rng := rand.New(rand.NewSource(seed))
	tr := &historyTraffic{
		c: c, rec: history.NewRecorder(), skills: skills,
		k:    &known{agents: map[string][]string{}, secrets: map[string][][2]string{}, domains: map[string][][3]string{}},
		toks: map[string]string{}, homes: map[string]string{},
	}
	limits := history.Limits{Agents: map[string]int{}}
	for _, s := range []string{"a", "b", "c"} {
		ws := fmt.Sprintf("hist-%d-%s", run, s)
		tr.spaces = append(tr.spaces, ws)
		workspaceIn(t, c.cp.Client, ws, agentsv1.PlanPro, func(s *agentsv1.WorkspaceSpec) { s.AgentLimit = new(int32(historyAgentMax + 1)) })
		c.admitsAgents(t, ws)
		limits.Agents[ws] = historyAgentMax + 1
		tr.toks[ws] = tokenFrom(t, c.cp.Client, c.signer, ws)
		tr.homes[ws] = newAgent(t, c.url(procManager), tr.toks[ws], ws+" home")
		for i := range skills {
			expect(t, call(c.url(procManager), "POST", fmt.Sprintf("/v0/clawhub/hist-skill-%d/install", i), tr.toks[ws], nil), 201, "install skill")
		}
		// The home agents are live from the start, without domains, skills or channels: the
		// models start there.
		tr.rec.Add(history.Op{Client: historyClients, Kind: history.CreateAgent, Workspace: ws, Name: "home", Status: 201, ID: tr.homes[ws]})
	}
	// Three homes of at most 5 domains over 20 names: homes often sit at their limit while
	// names are free.
	for i := range 20 {
		tr.subdomains = append(tr.subdomains, fmt.Sprintf("hx%d-%d", run, i))
	}
	faults := pickFaults(rng)
	t.Logf("faults: %s", faultNames(faults))
	stop := time.Now().Add(duration)
	var wg sync.WaitGroup
	for cl := range historyClients {
		wg.Add(1)
		go func(cl int) {
			defer wg.Done()
			rng := rand.New(rand.NewSource(seed + int64(cl) + 1))
			for time.Now().Before(stop) {
				// A client thinks between requests and backs off after an answer that leaves
				// it in doubt, as real clients do (and the checker's search stays small: each
				// ambiguous op may be placed anywhere after its call).
				pause := time.Duration(50+rng.Intn(100)) * time.Millisecond
				if tr.step(cl, rng) {
					pause = time.Second
				}
				time.Sleep(pause)
			}
		}(cl)
	}
	// The faults, one after another, spread over the traffic.
	gap := duration / time.Duration(len(faults)+1)
	for _, f := range faults {
		time.Sleep(gap/2 + time.Duration(rng.Int63n(int64(gap/2))))
		start := time.Now()
		f.do(t, c, rng)
		t.Logf("fault %q took %s", f.name, time.Since(start).Round(time.Millisecond))
		c.ensureUp(t)
	}
	wg.Wait()
	c.ensureUp(t)

	ops := tr.rec.Ops()
	validateAfterTraffic(t, tr, ops)
	ops = resolveOutcomes(t, tr, ops)
	out := filepath.Join(os.TempDir(), fmt.Sprintf("agentplane-history-%d", seed))
	res, err := history.Check(ops, limits, out, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	byStatus := map[int]int{}
	for _, o := range ops {
		byStatus[o.Status]++
	}
	t.Logf("%s; answers by status %v; %s", res, byStatus, latencies(ops))
	for _, v := range res.Violations() {
		if v.Verdict == porcupine.Unknown {
			// Undecided within the checker's time proves nothing: the history was not checked.
			t.Errorf("%s could not be decided within the checker's time (%d ops): the history is unchecked; see %s", v.Key, v.Ops, v.History)
			continue
		}
		t.Errorf("%s is not linearizable (%d ops): see %s and %s", v.Key, v.Ops, v.Visualization, v.History)
	}
	if res.OK() {
		_ = os.RemoveAll(out)
	} else {
		c.keepLogs(t, out)
		t.Logf("the processes' logs are kept in %s", out)
	}
}

// step does one random operation and records it; it reports whether the answer was
// ambiguous.
func (tr *historyTraffic) step(cl int, rng *rand.Rand) bool {
	ws := tr.spaces[rng.Intn(len(tr.spaces))]
	home := tr.homes[ws]
	op := history.Op{Client: cl, Workspace: ws}
	var method, path string
	var body any
	switch n := rng.Intn(13); {
	case n == 0:
		op.Kind, op.Name = history.CreateAgent, fmt.Sprintf("h%d-%d", rng.Intn(1000), tr.creates.Add(1))
		method, path, body = "POST", "/v0/agents?wait=false", map[string]any{"name": op.Name}
	case n == 1:
		id, ok := take(&tr.k.Mutex, tr.k.agents, ws, rng)
		if !ok {
			return false
		}
		op.Kind, op.Agent = history.DeleteAgent, id
		method, path = "DELETE", "/v0/agents/"+id
	case n == 2:
		op.Kind, op.Name = history.CreateSecret, fmt.Sprintf("HK_%d", rng.Intn(3))
		method, path, body = "POST", "/v0/secrets", map[string]any{"name": op.Name, "value": remember("secret value", fmt.Sprintf("hist-value-%d-%d", cl, rng.Int63()))}
	case n == 3:
		s, ok := take(&tr.k.Mutex, tr.k.secrets, ws, rng)
		if !ok {
			return false
		}
		op.Kind, op.Target, op.Name = history.DeleteSecret, s[0], s[1]
		method, path = "DELETE", "/v0/secrets/"+s[0]
	case n == 4, n == 5:
		op.Kind, op.Agent, op.Name = history.CreateDomain, home, tr.subdomains[rng.Intn(len(tr.subdomains))]
		method, path, body = "POST", "/v0/agents/"+home+"/domains", map[string]any{"subdomain": op.Name}
		if n == 5 {
			// Contention: another workspace's home asks for the same name at the same moment
			// (recorded as a client of its own).
			other := tr.spaces[(slices.Index(tr.spaces, ws)+1+rng.Intn(len(tr.spaces)-1))%len(tr.spaces)]
			twin := history.Op{Client: cl + historyClients + 1, Kind: history.CreateDomain, Workspace: other, Agent: tr.homes[other], Name: op.Name}
			twinRng := rand.New(rand.NewSource(rng.Int63()))
			done := make(chan struct{})
			go func() {
				defer close(done)
				tr.call(&twin, twinRng, "POST", "/v0/agents/"+twin.Agent+"/domains", map[string]any{"subdomain": twin.Name})
			}()
			defer func() { <-done }()
		}
	case n == 6, n == 12:
		d, ok := take(&tr.k.Mutex, tr.k.domains, ws, rng)
		if !ok {
			return false
		}
		op.Kind, op.Target, op.Agent, op.Name = history.DeleteDomain, d[0], d[1], d[2]
		method, path = "DELETE", "/v0/agents/"+d[1]+"/domains/"+d[0]
	case n == 7, n == 8:
		picked := map[string]bool{}
		for range 1 + rng.Intn(3) {
			picked[tr.skills[rng.Intn(len(tr.skills))]] = true
		}
		var list []string
		for id := range picked {
			list = append(list, id)
		}
		slices.Sort(list)
		op.Kind, op.Agent, op.Name = history.AttachSkill, home, strings.Join(list, ",")
		method, path, body = "POST", "/v0/agents/"+home+"/skills", map[string]any{"skillCids": list}
	case n == 9:
		op.Kind, op.Agent, op.Target = history.DetachSkill, home, tr.skills[rng.Intn(len(tr.skills))]
		method, path = "DELETE", "/v0/agents/"+home+"/skills/"+op.Target
	case n == 10:
		op.Kind, op.Agent, op.Name = history.SetChannel, home, historyChannels[rng.Intn(len(historyChannels))]
		method, path = "POST", "/v0/agents/"+home+"/channels/"+op.Name
		if rng.Intn(2) == 0 {
			path += "?wait=false"
		}
		if rng.Intn(5) == 0 {
			op.Target, body = "no-token", map[string]any{}
		} else {
			body = map[string]any{"botToken": remember("channel bot token", fmt.Sprintf("12345:hist-%d-%d", cl, rng.Int63()))}
		}
	default:
		op.Kind, op.Agent, op.Name = history.DeleteChannel, home, historyChannels[rng.Intn(len(historyChannels))]
		method, path = "DELETE", "/v0/agents/"+home+"/channels/"+op.Name
	}
	tr.call(&op, rng, method, path, body)
	return op.Ambiguous()
}

// call sends op's request to a facade that is up, records its answer and remembers what it
// created. A request that never reached a facade (refused: the process was down) is not an
// operation and is not recorded.
func (tr *historyTraffic) call(op *history.Op, rng *rand.Rand, method, path string, body any) {
	op.Facade = rng.Intn(2)
	base := tr.c.url(op.Facade)
	if base == "" {
		op.Facade = 1 - op.Facade
		if base = tr.c.url(op.Facade); base == "" {
			return
		}
	}
	ws := op.Workspace
	op.Call = tr.rec.Now()
	op.RequestID = fmt.Sprintf("hist-c%d-%d", op.Client, op.Call)
	r := callWithID(trafficCallTimeout, base, method, path, tr.toks[ws], body, op.RequestID)
	op.Return = tr.rec.Now()
	if errors.Is(r.Err, syscall.ECONNREFUSED) {
		return
	}
	if r.Err == nil {
		op.Status, op.Error = r.Status, r.errorMsg()
	}
	if op.Status/100 == 2 {
		switch op.Kind {
		case history.CreateAgent:
			op.ID = fmt.Sprint(r.obj("agent")["id"])
			keep(&tr.k.Mutex, tr.k.agents, ws, op.ID)
		case history.CreateSecret:
			op.ID = fmt.Sprint(r.obj("secret")["id"])
			keep(&tr.k.Mutex, tr.k.secrets, ws, [2]string{op.ID, op.Name})
		case history.CreateDomain:
			op.ID = fmt.Sprint(r.obj("domain")["id"])
			keep(&tr.k.Mutex, tr.k.domains, ws, [3]string{op.ID, op.Agent, op.Name})
		}
	}
	tr.rec.Add(*op)
}

// latencies sums up the history: operations and their median latency by kind.
func latencies(ops []history.Op) string {
	byKind := map[history.Kind][]time.Duration{}
	for _, o := range ops {
		if o.Return > o.Call {
			byKind[o.Kind] = append(byKind[o.Kind], time.Duration(o.Return-o.Call))
		}
	}
	var out []string
	for k, ds := range byKind {
		slices.Sort(ds)
		out = append(out, fmt.Sprintf("%s %d (median %s)", k, len(ds), ds[len(ds)/2].Round(time.Millisecond)))
	}
	slices.Sort(out)
	return strings.Join(out, ", ")
}
