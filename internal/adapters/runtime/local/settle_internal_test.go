package local

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// startTree starts sh -c script as the root of a process tree and ends it at cleanup.
func startTree(t *testing.T, script string) int {
	t.Helper()
	cmd := exec.Command("sh", "-c", script)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = exec.Command("pkill", "-KILL", "-P", strconv.Itoa(cmd.Process.Pid)).Run()
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	return cmd.Process.Pid
}

// TestSettle: a checkpoint waits for the sandbox to hold still. A tree that only sleeps
// settles; one that keeps spawning processes, or keeps a CPU busy, does not within the bound
// (and the dump then goes ahead, said by settle's false). The sleeping tree is a real one;
// the other two are trees as settle reads them, so that how much of a CPU a busy loop gets
// on a loaded machine does not decide the verdict (on a busy CI machine a real loop got too
// little of one in a 300 ms window and the tree counted as idle).
func TestSettle(t *testing.T) {
	ctx := context.Background()
	t.Run("idle", func(t *testing.T) {
		pid := startTree(t, "sleep 60 & wait")
		if !settle(ctx, pid, 300*time.Millisecond, 3*time.Second, settleCPU, nil) {
			t.Fatal("a tree that only sleeps did not settle")
		}
	})
	reads := 0
	for _, tc := range []struct {
		name string
		read func() (map[int]uint64, uint64)
	}{
		// A new process at every read.
		{"spawning", func() (map[int]uint64, uint64) { reads++; return map[int]uint64{1: 1, 1 + reads: uint64(reads)}, 0 }},
		// A second of CPU at every read (a tick is 100 ms): ten CPUs' worth, whatever the load.
		{"busy", func() (map[int]uint64, uint64) {
			reads++
			return map[int]uint64{1: 1}, uint64(reads) * uint64(clockTicks)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if settleTree(ctx, tc.read, func() bool { return false }, 300*time.Millisecond, 3*time.Second, settleCPU) {
				t.Fatal("settled")
			}
		})
	}
	// An idle tree that something else holds (a relay's send of the agent's in flight, data
	// waiting in its sockets) settles only once it is let go, and quiet from then on.
	idle := func() (map[int]uint64, uint64) { return map[int]uint64{1: 1}, 0 }
	t.Run("held", func(t *testing.T) {
		if settleTree(ctx, idle, func() bool { return true }, 300*time.Millisecond, 3*time.Second, settleCPU) {
			t.Fatal("settled while held")
		}
	})
	t.Run("let go", func(t *testing.T) {
		held := 5 // reads
		if !settleTree(ctx, idle, func() bool { held--; return held > 0 }, 300*time.Millisecond, 3*time.Second, settleCPU) {
			t.Fatal("did not settle once let go")
		}
	})
}

// TestQueuedSockets: a socket whose data its process has not read is listed by its local
// address (as /proc/net/tcp writes it), and no longer once the data is read.
func TestQueuedSockets(t *testing.T) {
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err == nil {
			accepted <- c
		}
		close(accepted)
	}()
	client, err := net.Dial("tcp4", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	server, ok := <-accepted
	if !ok {
		t.Fatal("accept failed")
	}
	defer server.Close()
	port := client.LocalAddr().(*net.TCPAddr).Port
	addr := fmt.Sprintf("0100007F:%04X", port)
	// The calling thread's table (/proc/self/ is the main thread's, which a goroutine that
	// made a network namespace and ended locked, newLoopbackNetNS, may have left parked in it).
	listed := func() bool {
		b, err := os.ReadFile("/proc/thread-self/net/tcp")
		if err != nil {
			t.Fatal(err)
		}
		return slices.Contains(queuedSockets(b), addr)
	}
	if listed() {
		t.Fatalf("%s listed before anything was sent to it", addr)
	}
	if _, err := server.Write([]byte("answer")); err != nil {
		t.Fatal(err)
	}
	// Wait until the bytes are in the client's queue (its socket readable), reading none.
	raw, err := client.(*net.TCPConn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	if err := client.SetReadDeadline(time.Now().Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if err := raw.Read(func(fd uintptr) bool {
		n, _, err := syscall.Recvfrom(int(fd), make([]byte, 1), syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		return n > 0 || err != syscall.EAGAIN
	}); err != nil {
		t.Fatal(err)
	}
	if !listed() {
		t.Fatalf("%s holds unread bytes and is not listed", addr)
	}
	if _, err := io.ReadFull(client, make([]byte, len("answer"))); err != nil {
		t.Fatal(err)
	}
	if listed() {
		t.Fatalf("%s is listed after its bytes were read", addr)
	}
}
