// Package syscallpolicy is the one list of system calls code in an agent never needs and that
// are the kernel's common attack surface, and what each runtime builds from it: the local
// runtime's seccomp filter (package local) and the kube runtime's seccomp profile for its
// gateway pods (Profile).
package syscallpolicy

import "golang.org/x/sys/unix"

// Refusal is a system call every agent's sandbox answers with an error instead of running it.
type Refusal struct {
	Name  string
	Nr    uint32
	Errno unix.Errno
	// Flags, when set, refuses the call only when its first argument has one of these bits
	// (unshare's and clone's CLONE_NEWUSER).
	Flags uint32
}

// Refused are the system calls code in an agent never needs and that are the kernel's common
// attack surface: the one list every sandbox's seccomp filter is built from (the local
// runtime's sandboxFilter, the kube runtime's Profile). New user namespaces are refused
// whoever runs the manager (as an ordinary user bwrap also sets --disable-userns), so no
// agent gets namespaced CAP_SYS_ADMIN or
// CAP_NET_ADMIN (nf_tables, overlayfs); clone3 answers ENOSYS, as on kernels without it, since
// a filter cannot read its flags: the C library falls back to clone, whose flags it can.
// io_uring answers ENOSYS too: libuv (Node) falls back to epoll, and CRIU cannot checkpoint an
// io_uring.
var Refused = []Refusal{
	{Name: "io_uring_setup", Nr: unix.SYS_IO_URING_SETUP, Errno: unix.ENOSYS},
	{Name: "io_uring_enter", Nr: unix.SYS_IO_URING_ENTER, Errno: unix.ENOSYS},
	{Name: "io_uring_register", Nr: unix.SYS_IO_URING_REGISTER, Errno: unix.ENOSYS},
	{Name: "clone3", Nr: unix.SYS_CLONE3, Errno: unix.ENOSYS},
	{Name: "unshare", Nr: unix.SYS_UNSHARE, Errno: unix.EPERM, Flags: unix.CLONE_NEWUSER},
	{Name: "clone", Nr: unix.SYS_CLONE, Errno: unix.EPERM, Flags: unix.CLONE_NEWUSER},
	{Name: "bpf", Nr: unix.SYS_BPF, Errno: unix.EPERM},
	{Name: "perf_event_open", Nr: unix.SYS_PERF_EVENT_OPEN, Errno: unix.EPERM},
	{Name: "userfaultfd", Nr: unix.SYS_USERFAULTFD, Errno: unix.EPERM},
	{Name: "keyctl", Nr: unix.SYS_KEYCTL, Errno: unix.EPERM},
	{Name: "add_key", Nr: unix.SYS_ADD_KEY, Errno: unix.EPERM},
	{Name: "request_key", Nr: unix.SYS_REQUEST_KEY, Errno: unix.EPERM},
	{Name: "mount", Nr: unix.SYS_MOUNT, Errno: unix.EPERM},
	{Name: "umount2", Nr: unix.SYS_UMOUNT2, Errno: unix.EPERM},
	{Name: "pivot_root", Nr: unix.SYS_PIVOT_ROOT, Errno: unix.EPERM},
	{Name: "open_tree", Nr: unix.SYS_OPEN_TREE, Errno: unix.EPERM},
	{Name: "move_mount", Nr: unix.SYS_MOVE_MOUNT, Errno: unix.EPERM},
	{Name: "fsopen", Nr: unix.SYS_FSOPEN, Errno: unix.EPERM},
	{Name: "fsconfig", Nr: unix.SYS_FSCONFIG, Errno: unix.EPERM},
	{Name: "fsmount", Nr: unix.SYS_FSMOUNT, Errno: unix.EPERM},
	{Name: "fspick", Nr: unix.SYS_FSPICK, Errno: unix.EPERM},
	{Name: "mount_setattr", Nr: unix.SYS_MOUNT_SETATTR, Errno: unix.EPERM},
	{Name: "open_by_handle_at", Nr: unix.SYS_OPEN_BY_HANDLE_AT, Errno: unix.EPERM},
	{Name: "kexec_load", Nr: unix.SYS_KEXEC_LOAD, Errno: unix.EPERM},
	{Name: "kexec_file_load", Nr: unix.SYS_KEXEC_FILE_LOAD, Errno: unix.EPERM},
	{Name: "init_module", Nr: unix.SYS_INIT_MODULE, Errno: unix.EPERM},
	{Name: "finit_module", Nr: unix.SYS_FINIT_MODULE, Errno: unix.EPERM},
	{Name: "delete_module", Nr: unix.SYS_DELETE_MODULE, Errno: unix.EPERM},
	{Name: "swapon", Nr: unix.SYS_SWAPON, Errno: unix.EPERM},
	{Name: "swapoff", Nr: unix.SYS_SWAPOFF, Errno: unix.EPERM},
	{Name: "reboot", Nr: unix.SYS_REBOOT, Errno: unix.EPERM},
	{Name: "acct", Nr: unix.SYS_ACCT, Errno: unix.EPERM},
}
