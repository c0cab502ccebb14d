package hostile

import (
	"flag"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
)

// reapOnInterrupt makes an interrupt kill this process's children (kube-apiserver, etcd, fake
// gateways, each the leader of its own process group) before the process dies of it. `go test
// -fuzz` interrupts a worker that takes more than a second to exit, and then kills it: without
// this, the control plane the worker started would outlive it. The fuzzing coordinator is left
// alone: it stops its workers gracefully and then runs TestMain's cleanup.
func reapOnInterrupt() {
	flag.Parse()
	if fuzz := flag.Lookup("test.fuzz"); fuzz != nil && fuzz.Value.String() != "" {
		if w := flag.Lookup("test.fuzzworker"); w == nil || w.Value.String() != "true" {
			return
		}
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	go func() {
		s := <-sig
		killChildren()
		signal.Reset(s)
		_ = syscall.Kill(os.Getpid(), s.(syscall.Signal))
	}()
}

// killChildren sends SIGKILL to the process group of every child of this process (Linux).
func killChildren() {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return
	}
	self := os.Getpid()
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid pgrp ...; comm may hold spaces and parentheses.
		rest := string(stat)
		if i := strings.LastIndexByte(rest, ')'); i >= 0 {
			rest = rest[i+1:]
		}
		f := strings.Fields(rest)
		if len(f) < 3 {
			continue
		}
		if ppid, _ := strconv.Atoi(f[1]); ppid != self {
			continue
		}
		if pgrp, _ := strconv.Atoi(f[2]); pgrp == pid {
			_ = syscall.Kill(-pid, syscall.SIGKILL)
		}
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
}
