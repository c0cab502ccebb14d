package local

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	goruntime "runtime"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"

	"github.com/agentplane/agentplane/internal/adapters/runtime/syscallpolicy"
)

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

// sandboxFilter is the classic BPF seccomp program of every sandbox: syscallpolicy.Refused answer
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
	for _, s := range syscallpolicy.Refused {
		ret := bpf.RetConstant{Val: retErrno | uint32(s.Errno)}
		if s.Flags == 0 {
			prog = append(prog, bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: s.Nr, SkipTrue: 1}, ret)
			continue
		}
		// nr != s.nr: on; else args[0] & flags == 0: allow; else refuse.
		prog = append(prog,
			bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: s.Nr, SkipTrue: 4},
			bpf.LoadAbsolute{Off: offArg0, Size: 4},
			bpf.JumpIf{Cond: bpf.JumpBitsNotSet, Val: s.Flags, SkipTrue: 1},
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
