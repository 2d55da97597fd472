"""The sandbox's seccomp filter: a BPF program for `bwrap --seccomp FD` that refuses what no exercise needs.

A deny-list of what no exercise needs,
each failing with EPERM: sockets other than AF_UNIX (no TCP or UDP, whose loopback buffers a v1
memory cgroup does not count), `memfd_create`, `memfd_secret` and `shmget` (memory that no process
maps is in nobody's RSS nor address space), the kernel's usual attack surface (io_uring,
userfaultfd, perf_event_open, bpf), ptrace and process_vm_*, keyrings, message queues, new
namespaces and mounts, modules and kexec, the host's settings, and any system call of a foreign
ABI (x32, i386). Built here as a BPF program, for x86-64 and arm64; elsewhere there is none.

`seccomp_works()` says whether this host can load it; `seccomp_refuses()` words it for `course doctor`.
"""

from __future__ import annotations

import errno
import platform
import struct

# What the sandbox refuses (EPERM), by why no exercise needs it: name -> (number on x86-64, on arm64), None
# where the architecture has no such call. The numbers are the kernel's (asm/unistd_64.h, asm-generic/unistd.h).
SECCOMP_REFUSED: dict[str, dict[str, tuple[int | None, int | None]]] = {
    # memory that no process maps is in nobody's RSS nor address space
    "memfd and SysV shared memory": {"memfd_create": (319, 279), "memfd_secret": (447, 447), "shmget": (29, 194)},
    # the kernel's code most often exploited from an unprivileged process (denied by container runtimes too)
    "io_uring, userfaultfd, perf and bpf": {
        "io_uring_setup": (425, 425),
        "io_uring_enter": (426, 426),
        "io_uring_register": (427, 427),
        "userfaultfd": (323, 282),
        "perf_event_open": (298, 241),
        "bpf": (321, 280),
        "modify_ldt": (154, None),
    },
    # reading, writing or stealing from another process (inside the sandbox there is only the learner's own)
    "ptrace and other processes' memory": {
        "ptrace": (101, 117),
        "process_vm_readv": (310, 270),
        "process_vm_writev": (311, 271),
        "pidfd_getfd": (438, 438),
    },
    "kernel keyrings": {"keyctl": (250, 219), "add_key": (248, 217), "request_key": (249, 218)},
    # queues that hold kernel memory of their own; no exercise uses them
    "SysV and POSIX message queues": {
        "msgget": (68, 186),
        "msgsnd": (69, 189),
        "msgrcv": (70, 188),
        "msgctl": (71, 187),
        "mq_open": (240, 180),
        "mq_unlink": (241, 181),
        "mq_timedsend": (242, 182),
        "mq_timedreceive": (243, 183),
        "mq_notify": (244, 184),
        "mq_getsetattr": (245, 185),
    },
    # bwrap has made the namespaces and mounts before the filter applies; the learner needs no more
    "new namespaces and mounts": {
        "unshare": (272, 97),
        "setns": (308, 268),
        "mount": (165, 40),
        "umount2": (166, 39),
        "pivot_root": (155, 41),
        "chroot": (161, 51),
        "open_tree": (428, 428),
        "move_mount": (429, 429),
        "fsopen": (430, 430),
        "fsconfig": (431, 431),
        "fsmount": (432, 432),
        "fspick": (433, 433),
        "mount_setattr": (442, 442),
        "open_tree_attr": (467, 467),
    },
    "kernel modules and kexec": {
        "init_module": (175, 105),
        "finit_module": (313, 273),
        "delete_module": (176, 106),
        "kexec_load": (246, 104),
        "kexec_file_load": (320, 294),
    },
    # the machine's own settings and logs: privileges the sandbox never has, refused before the kernel checks
    "host settings and logs": {
        "acct": (163, 89),
        "swapon": (167, 224),
        "swapoff": (168, 225),
        "reboot": (169, 142),
        "sethostname": (170, 161),
        "setdomainname": (171, 162),
        "settimeofday": (164, 170),
        "clock_settime": (227, 112),
        "syslog": (103, 116),
        "quotactl": (179, 60),
        "quotactl_fd": (443, 443),
        "iopl": (172, None),
        "ioperm": (173, None),
        "uselib": (134, None),
        "open_by_handle_at": (304, 265),
        "fanotify_init": (300, 262),
        "vhangup": (153, 58),
    },
}
REFUSED_CALLS = tuple(name for group in SECCOMP_REFUSED.values() for name in group)
# Calls allowed only with some arguments (the filter reads the low 32 bits of the first one, which is all
# the kernel reads of these: an int family, an unsigned persona; the namespace flags of clone):
# - socket, socketpair: only AF_UNIX (the kernel's link to the grader, multiprocessing). No TCP or UDP, not
#   even on the sandbox's loopback, whose socket buffers a v1 memory cgroup does not count;
# - personality: only the query (0xffffffff);
# - clone: without CLONE_NEW* flags; clone3 (its flags are in memory a filter cannot read) fails with
#   ENOSYS, on which the C library makes its threads and processes with clone.
SECCOMP_ARGUMENTS = {"socket": (41, 198), "socketpair": (53, 199), "personality": (135, 92), "clone": (56, 220)}
SECCOMP_ENOSYS = {"clone3": (435, 435)}
AF_UNIX, PERSONALITY_QUERY = 1, 0xFFFFFFFF
CLONE_NEW = 0x00000080 | 0x00020000 | 0x02000000 | 0x04000000 | 0x08000000 | 0x10000000 | 0x20000000 | 0x40000000

# arch (AUDIT_ARCH_*), x32 bit (0 where there is no such ABI), index of its numbers in the tables above
_ARCHES = {"x86_64": (0xC000003E, 0x40000000, 0), "aarch64": (0xC00000B7, 0, 1)}
# struct sock_filter {u16 code; u8 jt; u8 jf; u32 k;}, the BPF opcodes the filter uses, and where in
# struct seccomp_data {int nr; u32 arch; u64 instruction_pointer; u64 args[6];} it looks (little-endian)
_LD_W_ABS, _JEQ_K, _JGE_K, _JSET_K, _RET_K = 0x20, 0x15, 0x35, 0x45, 0x06
_NR, _ARCH, _ARG0_LOW = 0, 4, 16
_ALLOW, _ERRNO = 0x7FFF0000, 0x00050000


def seccomp_numbers(machine: str | None = None) -> dict[str, int] | None:
    """name -> system call number on this machine (or `machine`) of every call the filter looks at."""
    arch = _ARCHES.get(machine or platform.machine())
    if arch is None:
        return None
    tables = [*SECCOMP_REFUSED.values(), SECCOMP_ARGUMENTS, SECCOMP_ENOSYS]
    return {name: nrs[arch[2]] for table in tables for name, nrs in table.items() if nrs[arch[2]] is not None}


def seccomp_filter(machine: str | None = None) -> bytes | None:
    """A BPF program for `bwrap --seccomp FD`: the calls in SECCOMP_REFUSED, any foreign ABI (x32, i386),
    sockets other than AF_UNIX, personality other than the query and clone into new namespaces fail with
    EPERM, clone3 with ENOSYS; everything else is allowed. bwrap loads it last before it starts the
    kernel, with no_new_privs, so it holds for every thread and child and after every execve.
    None on an architecture it is not written for."""
    arch = _ARCHES.get(machine or platform.machine())
    if arch is None:
        return None
    audit, x32, _ = arch
    numbers = seccomp_numbers(machine)
    refused = [numbers[name] for group in SECCOMP_REFUSED.values() for name in group if name in numbers]
    # (code, k, label if true, label if false) for jumps, (code, k) otherwise; labels are resolved below.
    program: list[tuple] = [
        (_LD_W_ABS, _ARCH),
        (_JEQ_K, audit, None, "deny"),
        (_LD_W_ABS, _NR),
        *([(_JGE_K, x32, "deny", None)] if x32 else []),
        *[(_JEQ_K, nr, "deny", None) for nr in refused],
        (_JEQ_K, numbers["clone3"], "enosys", None),
        (_JEQ_K, numbers["socket"], "family", None),
        (_JEQ_K, numbers["socketpair"], "family", None),
        (_JEQ_K, numbers["personality"], "persona", None),
        (_JEQ_K, numbers["clone"], "clone", None),
        (_RET_K, _ALLOW),
        "family",
        (_LD_W_ABS, _ARG0_LOW),
        (_JEQ_K, AF_UNIX, "allow", "deny"),
        "persona",
        (_LD_W_ABS, _ARG0_LOW),
        (_JEQ_K, PERSONALITY_QUERY, "allow", "deny"),
        "clone",
        (_LD_W_ABS, _ARG0_LOW),
        (_JSET_K, CLONE_NEW, "deny", "allow"),
        "enosys",
        (_RET_K, _ERRNO | errno.ENOSYS),
        "deny",
        (_RET_K, _ERRNO | errno.EPERM),
        "allow",
        (_RET_K, _ALLOW),
    ]
    return _assemble(program)


def _assemble(program: list) -> bytes:
    """Classic BPF from instructions whose jumps name labels (strings in the list); None: the next one."""
    labels, pc = {}, 0
    for item in program:
        if isinstance(item, str):
            labels[item] = pc
        else:
            pc += 1
    out, pc = [], 0
    for item in program:
        if isinstance(item, str):
            continue
        code, k, *jumps = item
        offsets = [0 if label is None else labels[label] - pc - 1 for label in jumps] or [0, 0]
        if not all(0 <= off <= 255 for off in offsets):
            raise ValueError(f"a BPF jump of {offsets} at instruction {pc} does not fit in one byte")
        out.append(struct.pack("=HBBI", code, offsets[0], offsets[1], k))
        pc += 1
    return b"".join(out)


def seccomp_works() -> bool:
    """Whether the kernel takes seccomp filters at all (/proc/self/status has a Seccomp line)."""
    try:
        with open("/proc/self/status") as f:
            status = f.read()
    except OSError:
        return False
    return "Seccomp:" in status and seccomp_filter() is not None


def seccomp_refuses() -> str:
    """What the filter refuses, in a few words (for `course doctor`)."""
    return ", ".join(["sockets other than Unix (no TCP or UDP)", *SECCOMP_REFUSED, "foreign ABIs"])
