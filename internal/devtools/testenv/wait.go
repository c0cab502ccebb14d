package testenv

import "time"

// EventBound is how long an envtest suite waits for an event of the control plane (a
// reconcile's status, an object's removal, the facade's answer to a change) before it calls
// the event lost. The suites wait for events, never for a time: no verdict depends on how fast
// the machine is, and this bound only ends a wait that would otherwise never end. It is sized
// for a loaded 2-core machine (make test runs the envtest suites beside the real engine's
// gateways), where a reconcile has taken over 30 s; a short bound there fails a test that
// would pass.
const EventBound = 3 * time.Minute
