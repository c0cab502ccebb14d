package local

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	goruntime "runtime"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// refusedSyscall is a system call every sandbox answers with an error instead of running it.
type refusedSyscall struct {
	name  string
	nr    uint32
	errno unix.Errno
	// flags, when set, refuses the call only when its first argument has one of these bits
	// (unshare's and clone's CLONE_NEWUSER).
	flags uint32
}

// refusedSyscalls are the system calls code in an agent never needs and that are the kernel's
// common attack surface: the one list every sandbox's seccomp filter is built from
// (sandboxFilter). New user namespaces are refused whoever runs the manager (as an ordinary
// user bwrap also sets --disable-userns), so no agent gets namespaced CAP_SYS_ADMIN or
// CAP_NET_ADMIN (nf_tables, overlayfs); clone3 answers ENOSYS, as on kernels without it, since
// a filter cannot read its flags: the C library falls back to clone, whose flags it can.
// io_uring answers ENOSYS too: libuv (Node) falls back to epoll, and CRIU cannot checkpoint an
// io_uring.
var refusedSyscalls = []refusedSyscall{
	{name: "io_uring_setup", nr: unix.SYS_IO_URING_SETUP, errno: unix.ENOSYS},
	{name: "io_uring_enter", nr: unix.SYS_IO_URING_ENTER, errno: unix.ENOSYS},
	{name: "io_uring_register", nr: unix.SYS_IO_URING_REGISTER, errno: unix.ENOSYS},
	{name: "clone3", nr: unix.SYS_CLONE3, errno: unix.ENOSYS},
	{name: "unshare", nr: unix.SYS_UNSHARE, errno: unix.EPERM, flags: unix.CLONE_NEWUSER},
	{name: "clone", nr: unix.SYS_CLONE, errno: unix.EPERM, flags: unix.CLONE_NEWUSER},
	{name: "bpf", nr: unix.SYS_BPF, errno: unix.EPERM},
	{name: "perf_event_open", nr: unix.SYS_PERF_EVENT_OPEN, errno: unix.EPERM},
	{name: "userfaultfd", nr: unix.SYS_USERFAULTFD, errno: unix.EPERM},
	{name: "keyctl", nr: unix.SYS_KEYCTL, errno: unix.EPERM},
	{name: "add_key", nr: unix.SYS_ADD_KEY, errno: unix.EPERM},
	{name: "request_key", nr: unix.SYS_REQUEST_KEY, errno: unix.EPERM},
	{name: "mount", nr: unix.SYS_MOUNT, errno: unix.EPERM},
	{name: "umount2", nr: unix.SYS_UMOUNT2, errno: unix.EPERM},
	{name: "pivot_root", nr: unix.SYS_PIVOT_ROOT, errno: unix.EPERM},
	{name: "open_tree", nr: unix.SYS_OPEN_TREE, errno: unix.EPERM},
	{name: "move_mount", nr: unix.SYS_MOVE_MOUNT, errno: unix.EPERM},
	{name: "fsopen", nr: unix.SYS_FSOPEN, errno: unix.EPERM},
	{name: "fsconfig", nr: unix.SYS_FSCONFIG, errno: unix.EPERM},
	{name: "fsmount", nr: unix.SYS_FSMOUNT, errno: unix.EPERM},
	{name: "fspick", nr: unix.SYS_FSPICK, errno: unix.EPERM},
	{name: "mount_setattr", nr: unix.SYS_MOUNT_SETATTR, errno: unix.EPERM},
	{name: "open_by_handle_at", nr: unix.SYS_OPEN_BY_HANDLE_AT, errno: unix.EPERM},
	{name: "kexec_load", nr: unix.SYS_KEXEC_LOAD, errno: unix.EPERM},
	{name: "kexec_file_load", nr: unix.SYS_KEXEC_FILE_LOAD, errno: unix.EPERM},
	{name: "init_module", nr: unix.SYS_INIT_MODULE, errno: unix.EPERM},
	{name: "finit_module", nr: unix.SYS_FINIT_MODULE, errno: unix.EPERM},
	{name: "delete_module", nr: unix.SYS_DELETE_MODULE, errno: unix.EPERM},
	{name: "swapon", nr: unix.SYS_SWAPON, errno: unix.EPERM},
	{name: "swapoff", nr: unix.SYS_SWAPOFF, errno: unix.EPERM},
	{name: "reboot", nr: unix.SYS_REBOOT, errno: unix.EPERM},
	{name: "acct", nr: unix.SYS_ACCT, errno: unix.EPERM},
}

// Audit architectures (linux/audit.h) and the x32 ABI's syscall bit.
const (
	auditArchX86_64  = 0xc000003e
	auditArchAArch64 = 0xc00000b7
	x32SyscallBit    = 0x40000000
)

// seccomp_data's offsets: nr, arch, and the low 32 bits of args[0] (little endian).
const (
	offNr    = 0
	offArch  = 4
	offArg0  = 16
	retAllow = 0x7fff0000 // SECCOMP_RET_ALLOW
	retErrno = 0x00050000 // SECCOMP_RET_ERRNO | errno
)

// sandboxFilter is the classic BPF seccomp program of every sandbox: refusedSyscalls answer
// their errno, everything else runs. A system call of another architecture than this
// program's (the 32-bit ABI through int 0x80, x32), whose numbers the list does not name,
// answers ENOSYS.
func sandboxFilter() ([]byte, error) {
	arch := uint32(auditArchX86_64)
	if goruntime.GOARCH == "arm64" {
		arch = auditArchAArch64
	}
	other := bpf.RetConstant{Val: retErrno | uint32(unix.ENOSYS)}
	prog := []bpf.Instruction{
		bpf.LoadAbsolute{Off: offArch, Size: 4},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: arch, SkipTrue: 1},
		other,
		bpf.LoadAbsolute{Off: offNr, Size: 4},
	}
	if arch == auditArchX86_64 {
		prog = append(prog, bpf.JumpIf{Cond: bpf.JumpGreaterOrEqual, Val: x32SyscallBit, SkipFalse: 1}, other)
	}
	for _, s := range refusedSyscalls {
		ret := bpf.RetConstant{Val: retErrno | uint32(s.errno)}
		if s.flags == 0 {
			prog = append(prog, bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: s.nr, SkipTrue: 1}, ret)
			continue
		}
		// nr != s.nr: on; else args[0] & flags == 0: allow; else refuse.
		prog = append(prog,
			bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: s.nr, SkipTrue: 4},
			bpf.LoadAbsolute{Off: offArg0, Size: 4},
			bpf.JumpIf{Cond: bpf.JumpBitsNotSet, Val: s.flags, SkipTrue: 1},
			ret,
			bpf.RetConstant{Val: retAllow},
		)
	}
	prog = append(prog, bpf.RetConstant{Val: retAllow})
	raw, err := bpf.Assemble(prog)
	if err != nil {
		return nil, fmt.Errorf("seccomp filter: %w", err)
	}
	var b bytes.Buffer
	for _, in := range raw {
		_ = binary.Write(&b, binary.LittleEndian, struct {
			Op     uint16
			Jt, Jf uint8
			K      uint32
		}{in.Op, in.Jt, in.Jf, in.K})
	}
	return b.Bytes(), nil
}

// seccompFD is the file descriptor a sandbox's bwrap reads its seccomp filter from
// (--seccomp): the first of the process's extra files.
const seccompFD = 3

// seccompPipe returns the read end of a pipe that holds the filter, for bwrap's --seccomp.
func seccompPipe() (*os.File, error) {
	prog, err := sandboxFilter()
	if err != nil {
		return nil, err
	}
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	_, err = w.Write(prog)
	if cerr := w.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		r.Close()
		return nil, err
	}
	return r, nil
}
