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
				if held == "" {
					return []any{"", unknownID}
				}
				return []any{held}
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
			if state == "" {
				return "free"
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
				if len(ids) >= limit {
					return []any{cur}
				}
				return []any{cur, setOf(append(slices.Clone(ids), unknownID))}
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
