package engine

// InstanceResetter is an engine whose gateway keeps an identity of its own in its state (a
// device key, secrets it made itself, ids of its boot): a gateway restored from a template
// (the local runtime's) must forget the template's before it serves an agent, or every copy
// would share them.
type InstanceResetter interface {
	InstanceReset() InstanceReset
}

// InstanceReset is how a restored gateway forgets its template's identity: the statements
// run on its state database (by the template's own process before its dump, so no copy holds
// what they delete), then the signal that restarts each copy's gateway in its own process,
// which makes what they deleted anew (and reads its config afresh).
type InstanceReset struct {
	// DB is the state database (SQLite), relative to the home.
	DB string
	// SQL deletes what is the instance's own.
	SQL []string
	// Signal restarts the gateway in-process ("SIGUSR2").
	Signal string
}
