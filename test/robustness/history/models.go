package history

import (
	"fmt"
	"slices"

	"github.com/anishathalye/porcupine"
)

// Contract strings the models read (interface-spec.md).
const (
	errAgentLimit      = "Agent limit reached"
	errDuplicateSecret = "Duplicate secret name"
	errSubdomainTaken  = "Subdomain already taken"
)

// unknownID stands for the id of a create whose answer was ambiguous.
const unknownID = "?"

// phantomID stands for the slot or name a lost create (Outcome Lost) held for a while: it
// counts against limits and names like an object, and the platform gives it back at some
// later moment (the reservation goes stale), which a model's state may do before any step.
const phantomID = "~"

// released are the states s may be in by the time of a step: with any of its phantoms given
// back.
func released(s any) []any {
	switch s := s.(type) {
	case string:
		if s == phantomID {
			return []any{s, ""}
		}
	case setState:
		out := []any{s}
		for cur := s; slices.Contains(cur.items(), phantomID); {
			cur = cur.without(phantomID)
			out = append(out, cur)
		}
		return out
	}
	return []any{s}
}

// withReleases lets every step of nm start from any state its phantoms' releases lead to.
func withReleases(nm porcupine.NondeterministicModel) porcupine.NondeterministicModel {
	step := nm.Step
	nm.Step = func(state, input, output any) []any {
		var out []any
		for _, s := range released(state) {
			out = append(out, step(s, input, output)...)
		}
		return out
	}
	return nm
}

// ambiguousCreate is the states an ambiguous create may lead to from cur, where room reports
// whether the create fits (a free name, a slot below the limit) and took is cur with the
// create's object in it: its outcome, when known, narrows them.
func ambiguousCreate(s step, cur, took any, room bool) []any {
	switch {
	case s.Outcome == Landed && !room:
		return nil // it exists, so it took effect, which it could not have done here
	case !room:
		return []any{cur}
	case s.Outcome == Landed:
		return []any{took}
	}
	return []any{cur, took}
}

// step is an Op as a model sees it.
type step struct {
	Op
	// eventual: the effect lands some time after the answer (a delete that a controller's
	// finalizer completes); the op is checked as if it returned at the end of the history.
	eventual bool
	// phase splits an op with two effects in its interval into two steps: 1 the first, 2 the
	// second (0: one step). A channel delete that answered 200 first starts the removal (a
	// concurrent setup meets "being removed"), then sees the channel gone.
	phase int
}

func (s step) describe() string {
	out := fmt.Sprintf("%s %s", s.Kind, s.Name)
	if s.Target != "" {
		out += " " + s.Target
	}
	if s.Status == 0 {
		return out + " → no answer"
	}
	out += fmt.Sprintf(" → %d", s.Status)
	if s.Error != "" {
		out += " " + s.Error
	}
	if s.ID != "" {
		out += " " + s.ID
	}
	return out
}

// tookBy is what an ambiguous create s holds once it took effect: an object of unknown id, or
// a lost create's phantom.
func tookBy(s step) string {
	if s.Outcome == Lost {
		return phantomID
	}
	return unknownID
}

// holderModel is the model of one name that at most one object holds at a time: a secret name
// in a workspace, or a subdomain across all workspaces. Its state is the holder's id ("" when
// free, unknownID when an ambiguous create may hold it).
func holderModel(create, del Kind, takenErr string) porcupine.NondeterministicModel {
	return porcupine.NondeterministicModel{
		Init: func() []any { return []any{""} },
		Step: func(state, input, _ any) []any {
			held, s := state.(string), input.(step)
			switch {
			case s.Kind == create && s.Ambiguous():
				return ambiguousCreate(s, held, tookBy(s), held == "")
			case s.Kind == create && s.Status/100 == 2:
				if held != "" {
					return nil
				}
				return []any{s.ID}
			case s.Kind == create && s.Status == 409 && s.Error == takenErr:
				if held == "" {
					return nil
				}
				return []any{held}
			case s.Kind == create:
				return []any{held} // refused for another reason: no effect, no constraint
			case s.Kind == del && s.Ambiguous():
				if held == s.Target || held == unknownID {
					return []any{held, ""}
				}
				return []any{held}
			case s.Kind == del && s.Status/100 == 2:
				if held != s.Target && held != unknownID {
					return nil
				}
				return []any{""}
			case s.Kind == del && s.Status == 404:
				if held == s.Target {
					return nil
				}
				return []any{held}
			}
			return []any{held}
		},
		Equal:             func(a, b any) bool { return a == b },
		DescribeOperation: func(input, _ any) string { return input.(step).describe() },
		DescribeState: func(state any) string {
			switch state {
			case "":
				return "free"
			case phantomID:
				return "held for a lost create"
			}
			return "held by " + state.(string)
		},
	}
}

// agentsModel is the model of a workspace's agents under its limit: a create answers 2xx only
// below the limit and `Agent limit reached` (403) only at it; a delete frees the slot.
func agentsModel(limit int) porcupine.NondeterministicModel {
	return porcupine.NondeterministicModel{
		Init: func() []any { return []any{setState("")} },
		Step: func(state, input, _ any) []any {
			cur, s := state.(setState), input.(step)
			ids := cur.items()
			switch {
			case s.Kind == CreateAgent && s.Ambiguous():
				return ambiguousCreate(s, cur, cur.with(tookBy(s)), len(ids) < limit)
			case s.Kind == CreateAgent && s.Status/100 == 2:
				if len(ids) >= limit {
					return nil
				}
				return []any{setOf(append(slices.Clone(ids), s.ID))}
			case s.Kind == CreateAgent && s.Status == 403 && s.Error == errAgentLimit:
				if len(ids) < limit {
					return nil
				}
				return []any{cur}
			case s.Kind == CreateAgent:
				return []any{cur}
			case s.Kind == DeleteAgent:
				i := slices.Index(ids, s.Agent)
				if i < 0 {
					if s.Status/100 == 2 && !slices.Contains(ids, unknownID) {
						return nil // deleted an agent that does not exist
					}
					return []any{cur}
				}
				gone := setOf(slices.Delete(slices.Clone(ids), i, i+1))
				switch {
				case s.Ambiguous():
					return []any{cur, gone}
				case s.Status/100 == 2:
					return []any{gone}
				case s.Status == 404:
					return nil
				}
				return []any{cur}
			}
			return []any{cur}
		},
		Equal:             func(a, b any) bool { return a == b },
		DescribeOperation: func(input, _ any) string { return input.(step).describe() },
		DescribeState:     describeSet(limit),
	}
}
