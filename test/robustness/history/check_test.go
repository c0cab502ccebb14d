package history

import (
	"fmt"
	"math/rand"
	"os"
	"testing"
	"time"
)

// op builds a recorded operation: client c called at call and got its answer at ret.
func op(c int, k Kind, ws, name string, call, ret int64, status int, errStr, id string) Op {
	return Op{Client: c, Kind: k, Workspace: ws, Name: name, Call: call, Return: ret, Status: status, Error: errStr, ID: id}
}

func TestCheck(t *testing.T) {
	limits := Limits{Agents: map[string]int{"ws": 2}}
	for _, tc := range []struct {
		name string
		ops  []Op
		ok   bool
	}{
		{"serial secrets: create, duplicate, delete, create again", []Op{
			op(0, CreateSecret, "ws", "K", 0, 1, 201, "", "s1"),
			op(1, CreateSecret, "ws", "K", 2, 3, 409, errDuplicateSecret, ""),
			{Client: 0, Kind: DeleteSecret, Workspace: "ws", Name: "K", Target: "s1", Call: 4, Return: 5, Status: 200},
			op(1, CreateSecret, "ws", "K", 6, 7, 201, "", "s2"),
		}, true},
		{"two 201s for one secret name at once", []Op{
			op(0, CreateSecret, "ws", "K", 0, 10, 201, "", "s1"),
			op(1, CreateSecret, "ws", "K", 1, 9, 201, "", "s2"),
		}, false},
		{"concurrent secret creates: one 201, one 409", []Op{
			op(0, CreateSecret, "ws", "K", 0, 10, 409, errDuplicateSecret, ""),
			op(1, CreateSecret, "ws", "K", 1, 9, 201, "", "s2"),
		}, true},
		{"the domain race: limit and taken while nobody holds the name", []Op{
			op(0, CreateDomain, "full", "shared", 0, 10, 400, "Domain limit reached", ""),
			op(1, CreateDomain, "free", "shared", 1, 9, 409, errSubdomainTaken, ""),
		}, false},
		{"the domain race, serializable: limit and 201", []Op{
			op(0, CreateDomain, "full", "shared", 0, 10, 400, "Domain limit reached", ""),
			op(1, CreateDomain, "free", "shared", 1, 9, 201, "", "d1"),
		}, true},
		{"a subdomain whose delete answered 202 is released later", []Op{
			op(0, CreateDomain, "a", "x", 0, 1, 201, "", "d1"),
			{Client: 0, Kind: DeleteDomain, Workspace: "a", Name: "x", Target: "d1", Call: 2, Return: 3, Status: 202},
			op(1, CreateDomain, "b", "x", 4, 5, 409, errSubdomainTaken, ""),
			op(1, CreateDomain, "b", "x", 6, 7, 201, "", "d2"),
		}, true},
		{"a subdomain whose delete answered 200 is free at once", []Op{
			op(0, CreateDomain, "a", "x", 0, 1, 201, "", "d1"),
			{Client: 0, Kind: DeleteDomain, Workspace: "a", Name: "x", Target: "d1", Call: 2, Return: 3, Status: 200},
			op(1, CreateDomain, "b", "x", 4, 5, 409, errSubdomainTaken, ""),
		}, false},
		{"agents up to the limit, then refused", []Op{
			op(0, CreateAgent, "ws", "a", 0, 1, 201, "", "a1"),
			op(1, CreateAgent, "ws", "b", 0, 2, 201, "", "a2"),
			op(2, CreateAgent, "ws", "c", 3, 4, 403, errAgentLimit, ""),
		}, true},
		{"an agent over the limit", []Op{
			op(0, CreateAgent, "ws", "a", 0, 1, 201, "", "a1"),
			op(1, CreateAgent, "ws", "b", 2, 3, 201, "", "a2"),
			op(2, CreateAgent, "ws", "c", 4, 5, 201, "", "a3"),
		}, false},
		{"refused below the limit", []Op{
			op(0, CreateAgent, "ws", "a", 0, 1, 201, "", "a1"),
			op(2, CreateAgent, "ws", "c", 4, 5, 403, errAgentLimit, ""),
		}, false},
		{"an ambiguous create may have taken the slot", []Op{
			op(0, CreateAgent, "ws", "a", 0, 1, 201, "", "a1"),
			op(1, CreateAgent, "ws", "b", 2, 3, 0, "", ""),
			op(2, CreateAgent, "ws", "c", 4, 5, 403, errAgentLimit, ""),
		}, true},
		{"an ambiguous create may not have taken it either", []Op{
			op(0, CreateAgent, "ws", "a", 0, 1, 201, "", "a1"),
			op(1, CreateAgent, "ws", "b", 2, 3, 503, "Service unavailable", ""),
			op(2, CreateAgent, "ws", "c", 4, 5, 201, "", "a3"),
		}, true},
		// The slot of a create the platform could not finish (its answer lost, its caller killed
		// between the reservation and the object) is kept until it is stale: a create
		// meanwhile is refused, one after the release is not.
		{"a lost create held the last slot for a while", []Op{
			op(0, CreateAgent, "ws", "a", 0, 1, 201, "", "a1"),
			outcome(op(1, CreateAgent, "ws", "b", 2, 3, 503, "Service unavailable", ""), Lost),
			op(2, CreateAgent, "ws", "c", 4, 5, 403, errAgentLimit, ""),
			op(2, CreateAgent, "ws", "d", 6, 7, 201, "", "a4"),
		}, true},
		{"a create of unknown outcome holds its slot for good", []Op{
			op(0, CreateAgent, "ws", "a", 0, 1, 201, "", "a1"),
			op(1, CreateAgent, "ws", "b", 2, 3, 503, "Service unavailable", ""),
			op(2, CreateAgent, "ws", "c", 4, 5, 403, errAgentLimit, ""),
			op(2, CreateAgent, "ws", "d", 6, 7, 201, "", "a4"),
		}, false},
		{"a landed create holds its slot for good", []Op{
			op(0, CreateAgent, "ws", "a", 0, 1, 201, "", "a1"),
			outcome(op(1, CreateAgent, "ws", "b", 2, 3, 0, "", ""), Landed),
			op(2, CreateAgent, "ws", "c", 4, 5, 403, errAgentLimit, ""),
			op(2, CreateAgent, "ws", "d", 6, 7, 201, "", "a4"),
		}, false},
		{"a landed create took a slot: a third agent is over the limit", []Op{
			op(0, CreateAgent, "ws", "a", 0, 1, 201, "", "a1"),
			outcome(op(1, CreateAgent, "ws", "b", 2, 3, 0, "", ""), Landed),
			op(2, CreateAgent, "ws", "c", 4, 5, 201, "", "a3"),
		}, false},
		{"a lost create's name is held, then free", []Op{
			outcome(op(0, CreateDomain, "a", "x", 0, 1, 0, "", ""), Lost),
			op(1, CreateDomain, "b", "x", 2, 3, 409, errSubdomainTaken, ""),
			op(1, CreateDomain, "b", "x", 4, 5, 201, "", "d2"),
		}, true},
		{"a lost create made no object to delete", []Op{
			outcome(op(0, CreateDomain, "a", "x", 0, 1, 0, "", ""), Lost),
			{Client: 1, Kind: DeleteDomain, Workspace: "a", Name: "x", Target: "d1", Call: 2, Return: 3, Status: 200},
		}, false},
		{"a create of unknown outcome may have made one", []Op{
			op(0, CreateDomain, "a", "x", 0, 1, 0, "", ""),
			{Client: 1, Kind: DeleteDomain, Workspace: "a", Name: "x", Target: "d1", Call: 2, Return: 3, Status: 200},
		}, true},
		{"a deleted agent's slot comes back some time after the answer", []Op{
			op(0, CreateAgent, "ws", "a", 0, 1, 201, "", "a1"),
			op(1, CreateAgent, "ws", "b", 2, 3, 201, "", "a2"),
			{Client: 0, Kind: DeleteAgent, Workspace: "ws", Agent: "a1", Call: 4, Return: 5, Status: 200},
			op(2, CreateAgent, "ws", "c", 6, 7, 403, errAgentLimit, ""),
			op(2, CreateAgent, "ws", "c", 8, 9, 201, "", "a3"),
		}, true},
		{"a sixth domain of one agent", domainsOf("home", 6, 201), false},
		{"the limit answered at 5 domains", append(domainsOf("home", 5, 201),
			Op{Client: 1, Kind: CreateDomain, Workspace: "ws", Agent: "home", Name: "n5", Call: 100, Return: 101, Status: 400, Error: errDomainLimit}), true},
		{"the limit answered at 4 domains", append(domainsOf("home", 4, 201),
			Op{Client: 1, Kind: CreateDomain, Workspace: "ws", Agent: "home", Name: "n5", Call: 100, Return: 101, Status: 400, Error: errDomainLimit}), false},
		{"an eleventh skill attached", []Op{
			{Client: 0, Kind: AttachSkill, Workspace: "ws", Agent: "h", Name: "c0,c1,c2,c3,c4,c5", Call: 0, Return: 1, Status: 200},
			{Client: 1, Kind: AttachSkill, Workspace: "ws", Agent: "h", Name: "c6,c7,c8,c9,c10", Call: 2, Return: 3, Status: 200},
		}, false},
		{"two attaches racing for the last slots: one is refused", []Op{
			{Client: 0, Kind: AttachSkill, Workspace: "ws", Agent: "h", Name: "c0,c1,c2,c3,c4,c5,c6,c7", Call: 0, Return: 1, Status: 200},
			{Client: 1, Kind: AttachSkill, Workspace: "ws", Agent: "h", Name: "c8,c9", Call: 2, Return: 9, Status: 202},
			{Client: 2, Kind: AttachSkill, Workspace: "ws", Agent: "h", Name: "c10,c11", Call: 3, Return: 8, Status: 400, Error: errSkillsMax},
			{Client: 2, Kind: DetachSkill, Workspace: "ws", Agent: "h", Target: "c10", Call: 10, Return: 11, Status: 404, Error: errSkillNotFound},
		}, true},
		{"a detach of a skill that is attached answers 404", []Op{
			{Client: 0, Kind: AttachSkill, Workspace: "ws", Agent: "h", Name: "c0", Call: 0, Return: 1, Status: 200},
			{Client: 1, Kind: DetachSkill, Workspace: "ws", Agent: "h", Target: "c0", Call: 2, Return: 3, Status: 404, Error: errSkillNotFound},
		}, false},
		{"a channel set up, removed over time, set up again", []Op{
			{Client: 0, Kind: SetChannel, Workspace: "ws", Agent: "h", Name: "telegram", Call: 0, Return: 1, Status: 201},
			{Client: 0, Kind: DeleteChannel, Workspace: "ws", Agent: "h", Name: "telegram", Call: 2, Return: 3, Status: 202},
			{Client: 1, Kind: SetChannel, Workspace: "ws", Agent: "h", Name: "telegram", Call: 4, Return: 5, Status: 409, Error: errChannelRemoving},
			{Client: 1, Kind: SetChannel, Workspace: "ws", Agent: "h", Name: "telegram", Target: "no-token", Call: 6, Return: 7, Status: 400, Error: errBotTokenMissing},
			{Client: 1, Kind: SetChannel, Workspace: "ws", Agent: "h", Name: "telegram", Call: 8, Return: 9, Status: 201},
		}, true},
		{"a channel answered new twice", []Op{
			{Client: 0, Kind: SetChannel, Workspace: "ws", Agent: "h", Name: "telegram", Call: 0, Return: 1, Status: 201},
			{Client: 1, Kind: SetChannel, Workspace: "ws", Agent: "h", Name: "telegram", Call: 2, Return: 3, Status: 201},
		}, false},
		{"a setup meets the removal a concurrent delete started", []Op{
			{Client: 0, Kind: SetChannel, Workspace: "ws", Agent: "h", Name: "discord", Call: 0, Return: 1, Status: 201},
			{Client: 1, Kind: DeleteChannel, Workspace: "ws", Agent: "h", Name: "discord", Call: 2, Return: 10, Status: 200},
			{Client: 2, Kind: SetChannel, Workspace: "ws", Agent: "h", Name: "discord", Call: 3, Return: 4, Status: 409, Error: errChannelRemoving},
			{Client: 3, Kind: DeleteChannel, Workspace: "ws", Agent: "h", Name: "discord", Call: 5, Return: 10, Status: 200},
			{Client: 2, Kind: DeleteChannel, Workspace: "ws", Agent: "h", Name: "discord", Call: 11, Return: 12, Status: 404, Error: errChannelNotFound},
		}, true},
		{"a removed channel seen as being removed", []Op{
			{Client: 0, Kind: SetChannel, Workspace: "ws", Agent: "h", Name: "slack", Call: 0, Return: 1, Status: 201},
			{Client: 0, Kind: DeleteChannel, Workspace: "ws", Agent: "h", Name: "slack", Call: 2, Return: 3, Status: 200},
			{Client: 1, Kind: SetChannel, Workspace: "ws", Agent: "h", Name: "slack", Call: 4, Return: 5, Status: 409, Error: errChannelRemoving},
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			res, err := Check(tc.ops, limits, dir, 10*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			if res.OK() != tc.ok {
				t.Fatalf("OK = %v, want %v: %s", res.OK(), tc.ok, res)
			}
			for _, v := range res.Violations() {
				for _, f := range []string{v.Visualization, v.History} {
					if st, err := os.Stat(f); err != nil || st.Size() == 0 {
						t.Errorf("violation file %q: %v", f, err)
					}
				}
			}
		})
	}
}

// TestCheckBigHistory: 20 clients, a few hundred operations of a legal serial execution
// spread over overlapping intervals, check as linearizable; the figure is printed.
func TestCheckBigHistory(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	limits := Limits{Agents: map[string]int{"w0": 3, "w1": 3}}
	var ops []Op
	held := map[string]string{}     // partition name -> id
	agents := map[string][]string{} // workspace -> ids
	clock := int64(0)
	for i := range 400 {
		c := i % 20
		ws := fmt.Sprintf("w%d", rng.Intn(2))
		call := clock
		clock += 10
		ret := clock + int64(rng.Intn(5)) // answers come a little after the serial point
		switch rng.Intn(3) {
		case 0:
			name := fmt.Sprintf("S%d", rng.Intn(4))
			key := ws + "/" + name
			if held[key] == "" {
				held[key] = fmt.Sprint("s", i)
				ops = append(ops, op(c, CreateSecret, ws, name, call, ret, 201, "", held[key]))
			} else {
				ops = append(ops, Op{Client: c, Kind: DeleteSecret, Workspace: ws, Name: name, Target: held[key], Call: call, Return: ret, Status: 200})
				held[key] = ""
			}
		case 1:
			name := fmt.Sprintf("sub%d", rng.Intn(6))
			if held[name] == "" {
				held[name] = fmt.Sprint("d", i)
				ops = append(ops, op(c, CreateDomain, ws, name, call, ret, 201, "", held[name]))
			} else {
				ops = append(ops, op(c, CreateDomain, ws, name, call, ret, 409, errSubdomainTaken, ""))
			}
		default:
			if len(agents[ws]) < limits.Agents[ws] {
				id := fmt.Sprint("a", i)
				agents[ws] = append(agents[ws], id)
				ops = append(ops, op(c, CreateAgent, ws, id, call, ret, 201, "", id))
			} else if rng.Intn(2) == 0 {
				ops = append(ops, op(c, CreateAgent, ws, "x", call, ret, 403, errAgentLimit, ""))
			} else {
				id := agents[ws][0]
				agents[ws] = agents[ws][1:]
				ops = append(ops, Op{Client: c, Kind: DeleteAgent, Workspace: ws, Agent: id, Call: call, Return: ret, Status: 200})
			}
		}
	}
	start := time.Now()
	res, err := Check(ops, limits, t.TempDir(), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s in %s", res, time.Since(start).Round(time.Millisecond))
	if !res.OK() {
		t.Fatalf("a legal history was refused: %v", res.Violations())
	}
}

// outcome is o with what became of it.
func outcome(o Op, what Outcome) Op {
	o.Outcome = what
	return o
}

// domainsOf is n serial domain creates of agent (names n0, n1, ...), each answering status.
func domainsOf(agent string, n, status int) []Op {
	var ops []Op
	for i := range n {
		ops = append(ops, Op{Client: 0, Kind: CreateDomain, Workspace: "ws", Agent: agent, Name: fmt.Sprint("n", i),
			Call: int64(2 * i), Return: int64(2*i + 1), Status: status, ID: fmt.Sprint("d", i)})
	}
	return ops
}
