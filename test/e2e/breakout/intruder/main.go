// Command intruder is the hostile code of the breakout suite (package breakout): a static
// program that an agent's own tools could have downloaded, uploaded into an agent's home and
// run there through console exec. It tries each attempt of the plan given as its JSON
// argument and prints one JSON line per attempt: {"name", "done", "detail"}, where done means
// the attempt worked (a connection made, a file read, a namespace made, a limit passed).
//
// Attempts that could take the intruder itself down (a fork bomb, a memory hog) run in a
// child process of their own, in a process group that is killed once they end.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/agentplane/agentplane/test/e2e/breakout/plan"
)

// probeTimeout bounds each network attempt.
const probeTimeout = 3 * time.Second

func main() {
	if len(os.Args) > 2 && os.Args[1] == "-child" {
		os.Exit(child(os.Args[2], os.Args[3:]))
	}
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: intruder '<JSON plan>'")
		os.Exit(2)
	}
	var attempts []plan.Attempt
	if err := json.Unmarshal([]byte(os.Args[1]), &attempts); err != nil {
		fmt.Fprintln(os.Stderr, "plan:", err)
		os.Exit(2)
	}
	// Attempts run side by side (the network ones wait for their time-outs together); the
	// heavy ones are alone in their plans.
	results := make([]plan.Result, len(attempts))
	var wg sync.WaitGroup
	for i, a := range attempts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			done, detail := try(a)
			results[i] = plan.Result{Name: a.Name, Done: done, Detail: detail}
		}()
	}
	wg.Wait()
	enc := json.NewEncoder(os.Stdout)
	for _, r := range results {
		_ = enc.Encode(r)
	}
}

func try(a plan.Attempt) (bool, string) {
	switch a.Kind {
	case "tcp":
		c, err := net.DialTimeout("tcp", a.Arg, probeTimeout)
		if err != nil {
			return false, err.Error()
		}
		c.Close()
		return true, "connected"
	case "dns": // Arg: server|name
		server, name, _ := strings.Cut(a.Arg, "|")
		r := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "udp", server)
		}}
		ctx, cancel := context.WithTimeout(context.Background(), probeTimeout)
		defer cancel()
		addrs, err := r.LookupHost(ctx, name)
		if err != nil {
			return false, err.Error()
		}
		return true, strings.Join(addrs, ",")
	case "read":
		return read(a.Arg)
	case "proc":
		return inProc(a.Arg)
	case "procnet":
		return listening(a.N)
	case "userns":
		cmd := exec.Command("/proc/self/exe", "-child", "noop")
		cmd.SysProcAttr = &syscall.SysProcAttr{
			Cloneflags:  syscall.CLONE_NEWUSER,
			UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getuid(), Size: 1}},
			GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getgid(), Size: 1}},
		}
		if out, err := cmd.CombinedOutput(); err != nil {
			return false, strings.TrimSpace(err.Error() + " " + string(out))
		}
		return true, "a user namespace was made"
	case "syscall":
		return kernelCall(a.Arg)
	case "fallocate": // Arg: a file to reserve N bytes in (removed after)
		return reserve(a.Arg, a.N)
	case "memory", "pids":
		return heavy(a)
	}
	return false, "unknown kind " + a.Kind
}

// read reports whether path can be read: a file's first bytes, a dir's names.
func read(path string) (bool, string) {
	st, err := os.Stat(path)
	if err != nil {
		return false, err.Error()
	}
	if st.IsDir() {
		names, err := os.ReadDir(path)
		if err != nil {
			return false, err.Error()
		}
		return true, fmt.Sprintf("a dir of %d entries", len(names))
	}
	f, err := os.Open(path)
	if err != nil {
		return false, err.Error()
	}
	defer f.Close()
	n, err := f.Read(make([]byte, 64))
	if n == 0 {
		return false, fmt.Sprint("read nothing: ", err)
	}
	return true, fmt.Sprintf("read %d bytes", n)
}

// inProc reports whether s is in any visible process's environment or command line, but
// the intruder's own and its shell's (whose command lines hold the plan, s included).
func inProc(s string) (bool, string) {
	cmdlines, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	seen := 0
	for _, c := range cmdlines {
		cmd, err := os.ReadFile(c)
		if err != nil || bytes.Contains(cmd, []byte(intruderName)) {
			continue
		}
		seen++
		env, _ := os.ReadFile(filepath.Join(filepath.Dir(c), "environ"))
		if bytes.Contains(cmd, []byte(s)) || bytes.Contains(env, []byte(s)) {
			return true, "found in " + filepath.Dir(c)
		}
	}
	return false, fmt.Sprintf("not in the %d other processes visible", seen)
}

// intruderName is in the intruder's command line and in its shell's.
const intruderName = ".intruder"

// listening reports whether /proc/net shows a socket listening on port.
func listening(port int64) (bool, string) {
	suffix := fmt.Sprintf(":%04X", port)
	for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n") {
			fs := strings.Fields(line)
			if len(fs) > 3 && strings.HasSuffix(fs[1], suffix) && fs[3] == "0A" {
				return true, f + ": " + fs[1]
			}
		}
	}
	return false, "not listed"
}

// kernelCall makes one call of the kernel's attack surface the way an unprivileged program
// can, where the kernel would answer it without a filter.
func kernelCall(name string) (bool, string) {
	var r uintptr
	var errno syscall.Errno
	switch name {
	case "keyctl": // add_key into the process keyring
		_, err := unix.AddKey("user", "intruder", []byte("x"), unix.KEY_SPEC_PROCESS_KEYRING)
		return err == nil, fmt.Sprint(err)
	case "io_uring_setup":
		var params [120]byte
		r, _, errno = unix.Syscall(unix.SYS_IO_URING_SETUP, 1, uintptr(unsafe.Pointer(&params[0])), 0)
	case "userfaultfd": // the mode unprivileged users keep: UFFD_USER_MODE_ONLY
		r, _, errno = unix.Syscall(unix.SYS_USERFAULTFD, unix.O_CLOEXEC|1, 0, 0)
	case "perf_event_open": // this process's own task clock, user space only
		attr := unix.PerfEventAttr{Type: unix.PERF_TYPE_SOFTWARE, Config: unix.PERF_COUNT_SW_TASK_CLOCK,
			Size: uint32(unsafe.Sizeof(unix.PerfEventAttr{})), Bits: unix.PerfBitExcludeKernel | unix.PerfBitExcludeHv}
		fd, err := unix.PerfEventOpen(&attr, 0, -1, -1, unix.PERF_FLAG_FD_CLOEXEC)
		if err == nil {
			unix.Close(fd)
		}
		return err == nil, fmt.Sprint(err)
	case "bpf": // an array map
		attr := [5]uint32{2, 4, 4, 1, 0}
		r, _, errno = unix.Syscall(unix.SYS_BPF, 0, uintptr(unsafe.Pointer(&attr[0])), unsafe.Sizeof(attr))
	default:
		return false, "unknown call " + name
	}
	if errno != 0 {
		return false, errno.Error()
	}
	unix.Close(int(r))
	return true, "fd " + strconv.Itoa(int(r))
}

// reserve reports whether n bytes could be reserved in a new file at path.
func reserve(path string, n int64) (bool, string) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return false, err.Error()
	}
	defer os.Remove(path)
	defer f.Close()
	if err := unix.Fallocate(int(f.Fd()), 0, 0, n); err != nil {
		return false, err.Error()
	}
	return true, fmt.Sprintf("%d bytes reserved", n)
}

// heavy runs a memory or pids attempt in a child of its own process group, kills the group
// once the child ends, and reads the child's verdict from its output.
func heavy(a plan.Attempt) (bool, string) {
	cmd := exec.Command("/proc/self/exe", "-child", a.Kind, strconv.FormatInt(a.N, 10), a.Arg)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		return false, "start: " + err.Error()
	}
	err := cmd.Wait()
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	detail := strings.TrimSpace(out.String())
	if len(detail) > 300 {
		detail = detail[len(detail)-300:]
	}
	if err != nil {
		return false, err.Error() + ": " + detail
	}
	return strings.HasPrefix(detail, "done"), detail
}

// child runs a heavy attempt; it prints "done ..." when the attempt went through.
func child(kind string, args []string) int {
	switch kind {
	case "noop":
		return 0
	case "memory": // touch every page of N bytes
		n, _ := strconv.ParseInt(args[0], 10, 64)
		b, err := unix.Mmap(-1, 0, int(n), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE|unix.MAP_NORESERVE)
		if err != nil {
			fmt.Println("mmap:", err)
			return 1
		}
		for i := 0; i < len(b); i += 4096 {
			b[i] = 1
		}
		fmt.Printf("done: %d bytes touched\n", n)
		return 0
	case "pids": // start N processes of the program args[1] (each sleeps), counting them
		n, _ := strconv.ParseInt(args[0], 10, 64)
		var started int64
		var err error
		for ; started < n; started++ {
			if _, err = syscall.ForkExec(args[1], []string{args[1], "120"}, &syscall.ProcAttr{}); err != nil {
				break
			}
		}
		if started == n {
			fmt.Printf("done: %d processes started\n", n)
			return 0
		}
		fmt.Printf("refused after %d processes: %v\n", started, err)
		if errors.Is(err, syscall.EAGAIN) {
			return 0
		}
		return 1
	}
	return 2
}
