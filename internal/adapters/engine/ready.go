package engine

import "context"

// ReadyChecker is an Engine whose gateway tells, beyond its health, when it has finished
// starting and has room to serve (a gateway answers its health check seconds before it is done
// with its start-up work). Runtimes use it to hand out only settled warm gateways.
type ReadyChecker interface {
	// Ready returns nil when the gateway at baseURL is ready to serve.
	Ready(ctx context.Context, baseURL string) error
}
