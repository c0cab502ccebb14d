package admission

// Versions are the engine versions the platform offers.
type Versions struct {
	// Default is used when an agent names no version.
	Default string
	// Available lists every version agents may run (Default included).
	Available []string
}

// Resolve returns the version to run for a requested one ("" = Default) and whether it is
// offered.
func (v Versions) Resolve(requested string) (string, bool) {
	if requested == "" {
		requested = v.Default
	}
	for _, a := range v.Available {
		if a == requested {
			return requested, true
		}
	}
	return requested, false
}
