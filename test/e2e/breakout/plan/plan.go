// Package plan is the wire format between the breakout suite and its intruder: the attempts
// the suite asks for (the intruder's JSON argument) and what each came to (one JSON line each).
package plan

// Attempt is one thing to try; what Arg and N mean depends on Kind: "tcp" (Arg host:port),
// "dns" (Arg server|name), "read" (Arg a path), "proc" (Arg a string to find in processes'
// environ and cmdline), "procnet" (N a port listened on), "userns", "syscall" (Arg its name),
// "fallocate" (Arg a file, N bytes), "memory" (N bytes touched), "pids" (N processes of the
// program Arg).
type Attempt struct {
	Name string `json:"name"`
	Kind string `json:"kind"`
	Arg  string `json:"arg,omitempty"`
	N    int64  `json:"n,omitempty"`
}

// Result is what an attempt came to: Done means it worked.
type Result struct {
	Name   string `json:"name"`
	Done   bool   `json:"done"`
	Detail string `json:"detail"`
}
