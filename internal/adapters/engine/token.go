package engine

import "context"

// TokenChecker is an Engine that can tell whether a running gateway accepts a token, without
// side effects. Runtimes use it to know when a token written into the config of a running
// gateway (a rotation, a warm gateway bound to an agent) is in force.
type TokenChecker interface {
	// TokenAccepted reports whether the gateway at baseURL authorizes token (false: it
	// refuses it). An error means the gateway gave no verdict (unreachable, an odd answer).
	TokenAccepted(ctx context.Context, baseURL, token string) (bool, error)
}
