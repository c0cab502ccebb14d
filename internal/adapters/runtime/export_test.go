package runtime

// IdleGC is the idle collector's module (idlegc.mjs), for its tests.
var IdleGC = idleGC
