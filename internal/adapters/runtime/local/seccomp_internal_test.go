package local

import (
	"encoding/binary"
	"testing"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"

	"github.com/agentplane/agentplane/internal/adapters/runtime/syscallpolicy"
)

// run runs the sandboxes' seccomp program on one system call (its number, architecture and
// first argument) and returns the action.
func runFilter(t *testing.T, nr, arch, arg0 uint32) uint32 {
	t.Helper()
	raw, err := sandboxFilter()
	if err != nil {
		t.Fatal(err)
	}
	var prog []bpf.RawInstruction
	for i := 0; i+8 <= len(raw); i += 8 {
		prog = append(prog, bpf.RawInstruction{Op: binary.LittleEndian.Uint16(raw[i:]), Jt: raw[i+2], Jf: raw[i+3], K: binary.LittleEndian.Uint32(raw[i+4:])})
	}
	insts, ok := bpf.Disassemble(prog)
	if !ok {
		t.Fatal("the filter does not disassemble")
	}
	vm, err := bpf.NewVM(insts)
	if err != nil {
		t.Fatal(err)
	}
	// seccomp_data: nr, arch, instruction pointer, args[6]. The VM reads big-endian words;
	// the kernel gives the program host-order words, so the data is laid out for that.
	data := make([]byte, 64)
	binary.BigEndian.PutUint32(data[offNr:], nr)
	binary.BigEndian.PutUint32(data[offArch:], arch)
	binary.BigEndian.PutUint32(data[offArg0:], arg0)
	ret, err := vm.Run(data)
	if err != nil {
		t.Fatal(err)
	}
	return uint32(ret)
}

// TestSandboxFilterRefusesTheList: every system call of syscallpolicy.Refused answers its errno
// (those refused for some flags only with them), every other one runs, and a call of another
// ABI (32-bit, x32), whose numbers the list does not cover, answers ENOSYS.
func TestSandboxFilterRefusesTheList(t *testing.T) {
	const arch = auditArchX86_64
	for _, s := range syscallpolicy.Refused {
		want := retErrno | uint32(s.Errno)
		if got := runFilter(t, s.Nr, arch, s.Flags|0x11); got != want {
			t.Errorf("%s: action %#x, want %#x", s.Name, got, want)
		}
		if s.Flags != 0 {
			if got := runFilter(t, s.Nr, arch, 0x11); got != retAllow {
				t.Errorf("%s without %#x: action %#x, want allow", s.Name, s.Flags, got)
			}
		}
	}
	for _, nr := range []uint32{unix.SYS_READ, unix.SYS_WRITE, unix.SYS_OPENAT, unix.SYS_EPOLL_WAIT, unix.SYS_EXECVE} {
		if got := runFilter(t, nr, arch, 0); got != retAllow {
			t.Errorf("syscall %d: action %#x, want allow", nr, got)
		}
	}
	enosys := retErrno | uint32(unix.ENOSYS)
	if got := runFilter(t, unix.SYS_READ, 0x40000003 /* i386 */, 0); got != enosys {
		t.Errorf("a 32-bit call: action %#x, want ENOSYS", got)
	}
	if got := runFilter(t, x32SyscallBit|unix.SYS_UNSHARE, arch, unix.CLONE_NEWUSER); got != enosys {
		t.Errorf("an x32 call: action %#x, want ENOSYS", got)
	}
}
