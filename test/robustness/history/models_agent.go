package history

import (
	"fmt"
	"slices"
	"strings"

	"github.com/anishathalye/porcupine"
)

// Contract strings of the per-agent models.
const (
	errDomainLimit     = "Domain limit reached"
	errSkillsMax       = "Validation failed: skills exceeds maximum of 10"
	errSkillNotFound   = "Skill not found"
	errChannelRemoving = "Channel is being removed"
	errChannelNotFound = "Channel not found"
	errBotTokenMissing = "botToken is required"
)

// Per-agent limits the models check (interface-spec.md §2).
const (
	maxDomainsPerAgent = 5
	maxSkillsPerAgent  = 10
)

// setState is a sorted set of ids joined by commas (unknownID entries for ambiguous adds): a
// workspace's agents, an agent's Domains, an agent's attached skills.
type setState string

func (s setState) items() []string {
	if s == "" {
		return nil
	}
	return strings.Split(string(s), ",")
}

func setOf(items []string) setState {
	slices.Sort(items)
	return setState(strings.Join(items, ","))
}

func (s setState) with(ids ...string) setState {
	out := s.items()
	for _, id := range ids {
		if id == unknownID || id == phantomID || !slices.Contains(out, id) {
			out = append(out, id)
		}
	}
	return setOf(out)
}

func (s setState) without(id string) setState {
	out := s.items()
	if i := slices.Index(out, id); i >= 0 {
		out = slices.Delete(out, i, i+1)
	}
	return setOf(out)
}

func describeSet(limit int) func(any) string {
	return func(state any) string {
		return fmt.Sprintf("%d of %d: %s", len(state.(setState).items()), limit, state)
	}
}

// domainSlotsModel is the model of one agent's Domains under its limit of 5: a create answers
// 2xx only below the limit and `Domain limit reached` only at it, whatever its name (the name
// itself is the subdomain partition's). A 409 (name taken) changes nothing here.
func domainSlotsModel() porcupine.NondeterministicModel {
	return porcupine.NondeterministicModel{
		Init: func() []any { return []any{setState("")} },
		Step: func(state, input, _ any) []any {
			cur, s := state.(setState), input.(step)
			n := len(cur.items())
			switch {
			case s.Kind == CreateDomain && s.Ambiguous():
				return ambiguousCreate(s, cur, cur.with(tookBy(s)), n < maxDomainsPerAgent)
			case s.Kind == CreateDomain && s.Status/100 == 2:
				if n >= maxDomainsPerAgent {
					return nil
				}
				return []any{cur.with(s.ID)}
			case s.Kind == CreateDomain && s.Status == 400 && s.Error == errDomainLimit:
				if n < maxDomainsPerAgent {
					return nil
				}
				return []any{cur}
			case s.Kind == CreateDomain:
				return []any{cur}
			}
			// DeleteDomain of Target.
			held := slices.Contains(cur.items(), s.Target)
			anyUnknown := slices.Contains(cur.items(), unknownID)
			switch {
			case s.Ambiguous():
				return []any{cur, cur.without(s.Target)}
			case s.Status/100 == 2:
				if !held && !anyUnknown {
					return nil
				}
				if !held {
					return []any{cur.without(unknownID)}
				}
				return []any{cur.without(s.Target)}
			case s.Status == 404 && held:
				return nil
			}
			return []any{cur}
		},
		Equal:             func(a, b any) bool { return a == b },
		DescribeOperation: func(input, _ any) string { return input.(step).describe() },
		DescribeState:     describeSet(maxDomainsPerAgent),
	}
}

// skillsModel is the model of one agent's attached skills (bundle CIDs) under the limit of
// 10: an attach answers 2xx only when the union stays within it and the limit's 400 only when
// it would not; a detach answers 2xx only for an attached skill and 404 only for one that is
// not.
func skillsModel() porcupine.NondeterministicModel {
	return porcupine.NondeterministicModel{
		Init: func() []any { return []any{setState("")} },
		Step: func(state, input, _ any) []any {
			cur, s := state.(setState), input.(step)
			if s.Kind == AttachSkill {
				next := cur.with(strings.Split(s.Name, ",")...)
				fits := len(next.items()) <= maxSkillsPerAgent
				switch {
				case s.Ambiguous():
					if !fits {
						return []any{cur}
					}
					return []any{cur, next}
				case s.Status/100 == 2:
					if !fits {
						return nil
					}
					return []any{next}
				case s.Status == 400 && s.Error == errSkillsMax:
					if fits {
						return nil
					}
				}
				return []any{cur}
			}
			attached := slices.Contains(cur.items(), s.Target)
			switch {
			case s.Ambiguous():
				return []any{cur, cur.without(s.Target)}
			case s.Status/100 == 2:
				if !attached {
					return nil
				}
				return []any{cur.without(s.Target)}
			case s.Status == 404 && s.Error == errSkillNotFound && attached:
				return nil
			}
			return []any{cur}
		},
		Equal:             func(a, b any) bool { return a == b },
		DescribeOperation: func(input, _ any) string { return input.(step).describe() },
		DescribeState:     describeSet(maxSkillsPerAgent),
	}
}

// Channel states: none, configured, or being removed (its Channel deleted, the finalizer
// still rendering it out of the engine config).
const (
	chanAbsent   = "absent"
	chanPresent  = "present"
	chanRemoving = "removing"
)

// channelModel is the model of one channel type of one agent. A setup with a token creates it
// (201 only when absent, 200 only when present) unless it is being removed (409); a setup
// without a token answers 400 only when the channel does not exist. A delete answers 404 only
// when absent; its 200 means it was found, its removal started (a concurrent setup may meet
// it), and it was gone by the answer; its 202 means being removed. A removal completes on its own at
// some later moment: a state "removing" may become "absent" before any step.
func channelModel() porcupine.NondeterministicModel {
	return porcupine.NondeterministicModel{
		Init: func() []any { return []any{chanAbsent} },
		Step: func(state, input, _ any) []any {
			var out []any
			for _, cur := range []string{state.(string)} {
				out = append(out, channelStep(cur, input.(step))...)
				if cur == chanRemoving {
					out = append(out, channelStep(chanAbsent, input.(step))...)
				}
			}
			return out
		},
		Equal:             func(a, b any) bool { return a == b },
		DescribeOperation: func(input, _ any) string { return input.(step).describe() },
		DescribeState:     func(state any) string { return state.(string) },
	}
}

func channelStep(cur string, s step) []any {
	if s.Kind == SetChannel {
		withToken := s.Target != "no-token"
		switch {
		case s.Ambiguous():
			if cur == chanRemoving || !withToken && cur == chanAbsent {
				return []any{cur}
			}
			return []any{cur, chanPresent}
		case s.Status == 201:
			if cur != chanAbsent || !withToken {
				return nil
			}
			return []any{chanPresent}
		case s.Status/100 == 2:
			if cur == chanRemoving || !withToken && cur == chanAbsent {
				return nil
			}
			if s.Status == 200 && cur != chanPresent {
				return nil
			}
			return []any{chanPresent}
		case s.Status == 409 && s.Error == errChannelRemoving:
			if cur != chanRemoving {
				return nil
			}
		case s.Status == 400 && s.Error == errBotTokenMissing:
			if withToken || cur != chanAbsent {
				return nil
			}
		}
		return []any{cur}
	}
	switch {
	case s.Ambiguous():
		if cur == chanAbsent {
			return []any{cur}
		}
		return []any{cur, chanRemoving, chanAbsent}
	case s.phase == 1:
		// A 200's first step: it found the channel and started its removal.
		if cur == chanAbsent {
			return nil
		}
		return []any{chanRemoving}
	case s.phase == 2:
		// Its second step: gone (another delete of the same channel may have finished it).
		if cur == chanPresent {
			return nil
		}
		return []any{chanAbsent}
	case s.Status == 202:
		if cur == chanAbsent {
			return nil
		}
		return []any{chanRemoving}
	case s.Status == 404 && s.Error == errChannelNotFound:
		if cur != chanAbsent {
			return nil
		}
	}
	return []any{cur}
}
