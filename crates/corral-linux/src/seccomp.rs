//! The worker's seccomp filter, built as data and unit-tested without installing it.
//!
//! * The architecture is checked first: x86_64 and aarch64 continue, every other
//!   architecture (ia32 `int 0x80`, arm32 compat, ...) is killed (`SECCOMP_RET_KILL_PROCESS`),
//!   so `socketcall` and the other ia32 entry points never reach the kernel.
//! * On x86_64 every syscall number with the x32 bit (`0x40000000`) gets ENOSYS: the x32 ABI
//!   shares `AUDIT_ARCH_X86_64`, and seccompiler does not handle it.
//! * Argument rules compare only the low 32 bits of an argument (`int` parameters are
//!   truncated by the kernel, so `AF_VSOCK | 1<<32` or `TIOCSTI | 1<<32` must still match).
//! * `clone3` gets ENOSYS (its flags sit in a struct the filter cannot read; libc falls back
//!   to `clone`, whose namespace flags are masked and denied).
//! * Everything else is allowed: this is a deny list of kernel attack surface on top of the
//!   namespaces, capabilities, `no_new_privs` and Landlock.

use std::fmt;

/// `struct sock_filter`.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SockFilter {
    /// The BPF instruction (class, size, mode, operation).
    pub code: u16,
    /// Instructions to skip when a conditional jump is taken.
    pub jt: u8,
    /// Instructions to skip when a conditional jump is not taken.
    pub jf: u8,
    /// The instruction's constant operand.
    pub k: u32,
}

const BPF_LD_W_ABS: u16 = 0x20; // BPF_LD | BPF_W | BPF_ABS
const BPF_JMP_JEQ_K: u16 = 0x05 | 0x10;
const BPF_JMP_JGE_K: u16 = 0x05 | 0x30;
const BPF_JMP_JSET_K: u16 = 0x05 | 0x40;
const BPF_JMP_JA: u16 = 0x05;
const BPF_RET_K: u16 = 0x06;

/// Filter result: kill the whole process.
pub const SECCOMP_RET_KILL_PROCESS: u32 = 0x8000_0000;
/// Filter result: fail the syscall with the errno in the low 16 bits.
pub const SECCOMP_RET_ERRNO: u32 = 0x0005_0000;
/// Filter result: run the syscall.
pub const SECCOMP_RET_ALLOW: u32 = 0x7fff_0000;
/// `seccomp_data.arch` of an x86_64 syscall (and of an x32 one).
pub const AUDIT_ARCH_X86_64: u32 = 0xc000_003e;
/// `seccomp_data.arch` of an aarch64 syscall.
pub const AUDIT_ARCH_AARCH64: u32 = 0xc000_00b7;
/// `seccomp_data.arch` of an ia32 syscall (`int 0x80`, compat mode).
pub const AUDIT_ARCH_I386: u32 = 0x4000_0003;
/// The x32 ABI's bit in x86_64 syscall numbers.
pub const X32_SYSCALL_BIT: u32 = 0x4000_0000;

const OFF_NR: u32 = 0;
const OFF_ARCH: u32 = 4;
const fn off_arg_low(arg: u8) -> u32 {
    16 + 8 * arg as u32
}

/// Namespace-creating flags of `clone(2)` (CLONE_NEWTIME shares the exit-signal byte of
/// `clone` and only works with `clone3`/`unshare`, both denied outright).
pub const CLONE_NS_FLAGS: u32 = 0x0002_0000 // CLONE_NEWNS
    | 0x0200_0000 // CLONE_NEWCGROUP
    | 0x0400_0000 // CLONE_NEWUTS
    | 0x0800_0000 // CLONE_NEWIPC
    | 0x1000_0000 // CLONE_NEWUSER
    | 0x2000_0000 // CLONE_NEWPID
    | 0x4000_0000; // CLONE_NEWNET

/// `ioctl` request that injects input into a terminal (denied: KRN-01).
pub const TIOCSTI: u32 = 0x5412;
/// `ioctl` request for Linux console functions, including selection paste (denied: KRN-01).
pub const TIOCLINUX: u32 = 0x541C;
/// `ioctl` request that redirects console output (denied: KRN-01).
pub const TIOCCONS: u32 = 0x541D;
/// `ioctl` request that sets a terminal's line discipline (denied: KRN-01).
pub const TIOCSETD: u32 = 0x5423;
/// Socket families the worker may create with `socket()`: AF_INET, AF_INET6 (its own
/// loopback, and the egress proxy in allowlist mode). Not AF_UNIX: `connect()` on a pathname
/// socket is not stopped by a read-only mount, and neither Landlock (ABI 7 scopes only abstract
/// sockets) nor a filter (the path is behind a pointer) can check the path, so a host service
/// whose socket file lies under a folder the sandbox sees read-only would be reachable
/// (adversarial case NET-05). ADR-0011.
pub const ALLOWED_FAMILIES: &[u32] = &[2, 10];
/// Protocols the worker may ask `socket()` for within those families: the default (0),
/// ICMP, TCP, UDP and ICMPv6. Any other number makes the kernel load the protocol's module
/// on demand when it is not built in: in a Debian 6.1 guest `socket(AF_INET, SOCK_STREAM,
/// IPPROTO_SCTP)` from inside the sandbox loaded `sctp`, `udp_tunnel` and `ip6_udp_tunnel`
/// into the host kernel (adversarial case KRN-06; a development host without loadable
/// modules never showed it). Refused with EPROTONOSUPPORT, what a kernel without the
/// protocol answers, so programs that probe (MPTCP, SCTP) fall back. ADR-0011.
pub const ALLOWED_PROTOCOLS: &[u32] = &[0, 1, 6, 17, 58];
const EPROTONOSUPPORT: i32 = 93;
/// Families for `socketpair()`: AF_UNIX only (connected pairs reach nothing outside; programs
/// use them for their own children's stdio and IPC).
pub const SOCKETPAIR_FAMILIES: &[u32] = &[1];

/// When a rule denies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cond {
    /// Whenever the syscall is made.
    Always,
    /// `low32(arg) & mask != 0`.
    ArgMaskAny {
        /// The argument's index (0-5).
        arg: u8,
        /// Bits of which any one set denies.
        mask: u32,
    },
    /// `low32(arg)` is one of `values`.
    ArgEqAny {
        /// The argument's index (0-5).
        arg: u8,
        /// The values that deny.
        values: &'static [u32],
    },
    /// `low32(arg)` is none of `allowed`.
    ArgNotIn {
        /// The argument's index (0-5).
        arg: u8,
        /// The only values allowed; any other denies.
        allowed: &'static [u32],
    },
}

/// One deny rule: the syscall on each architecture, the condition and the errno returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rule {
    /// The syscall's name.
    pub name: &'static str,
    /// Its number on x86_64, `None` when it has none there.
    pub x86_64: Option<u32>,
    /// Its number on aarch64, `None` when it has none there.
    pub aarch64: Option<u32>,
    /// When the rule denies.
    pub cond: Cond,
    /// The errno a denied call returns.
    pub errno: i32,
}

const EPERM: i32 = 1;
const ENOSYS: i32 = 38;

const fn deny(name: &'static str, x86_64: u32, aarch64: u32) -> Rule {
    Rule {
        name,
        x86_64: Some(x86_64),
        aarch64: Some(aarch64),
        cond: Cond::Always,
        errno: EPERM,
    }
}

const fn deny_x86(name: &'static str, x86_64: u32) -> Rule {
    Rule {
        name,
        x86_64: Some(x86_64),
        aarch64: None,
        cond: Cond::Always,
        errno: EPERM,
    }
}

/// The rule table (x86_64 and aarch64 numbers).
pub const RULES: &[Rule] = &[
    // Mount family: no mount tampering (FS-07).
    deny("mount", 165, 40),
    deny("umount2", 166, 39),
    deny("pivot_root", 155, 41),
    deny("move_mount", 429, 429),
    deny("open_tree", 428, 428),
    deny("fsopen", 430, 430),
    deny("fsconfig", 431, 431),
    deny("fsmount", 432, 432),
    deny("fspick", 433, 433),
    deny("mount_setattr", 442, 442),
    deny("open_tree_attr", 467, 467),
    deny("chroot", 161, 51),
    // Namespaces: no nested user namespace, no joining others (PROC-07, FS-07, KRN-05).
    deny("unshare", 272, 97),
    deny("setns", 308, 268),
    Rule {
        name: "clone",
        x86_64: Some(56),
        aarch64: Some(220),
        cond: Cond::ArgMaskAny {
            arg: 0,
            mask: CLONE_NS_FLAGS,
        },
        errno: EPERM,
    },
    Rule {
        name: "clone3",
        x86_64: Some(435),
        aarch64: Some(435),
        cond: Cond::Always,
        errno: ENOSYS,
    },
    // Other processes (CRED-07).
    deny("ptrace", 101, 117),
    deny("process_vm_readv", 310, 270),
    deny("process_vm_writev", 311, 271),
    deny("pidfd_getfd", 438, 438),
    deny("kcmp", 312, 272),
    // Kernel attack surface (KRN-02, KRN-03).
    deny("bpf", 321, 280),
    deny("perf_event_open", 298, 241),
    deny("userfaultfd", 323, 282),
    deny("io_uring_setup", 425, 425),
    deny("io_uring_enter", 426, 426),
    deny("io_uring_register", 427, 427),
    deny("fanotify_init", 300, 262),
    deny("lookup_dcookie", 212, 18),
    // Keyring (CRED-06).
    deny("keyctl", 250, 219),
    deny("add_key", 248, 217),
    deny("request_key", 249, 218),
    // Kernel code and machine state.
    deny("kexec_load", 246, 104),
    deny("kexec_file_load", 320, 294),
    deny("init_module", 175, 105),
    deny("finit_module", 313, 273),
    deny("delete_module", 176, 106),
    deny("open_by_handle_at", 304, 265),
    deny("name_to_handle_at", 303, 264),
    deny("acct", 163, 89),
    deny("swapon", 167, 224),
    deny("swapoff", 168, 225),
    deny("reboot", 169, 142),
    deny("settimeofday", 164, 170),
    deny("clock_settime", 227, 112),
    deny("clock_adjtime", 305, 266),
    deny("adjtimex", 159, 171),
    deny("quotactl", 179, 60),
    deny("quotactl_fd", 443, 443),
    deny("syslog", 103, 116),
    deny("vhangup", 153, 58),
    deny_x86("iopl", 172),
    deny_x86("ioperm", 173),
    deny_x86("uselib", 134),
    deny_x86("_sysctl", 156),
    // Terminal injection (KRN-01), low 32 bits of the request.
    Rule {
        name: "ioctl",
        x86_64: Some(16),
        aarch64: Some(29),
        cond: Cond::ArgEqAny {
            arg: 1,
            values: &[TIOCSTI, TIOCLINUX, TIOCCONS, TIOCSETD],
        },
        errno: EPERM,
    },
    // Socket families (NET-02, NET-13, KRN-06), low 32 bits of the domain.
    Rule {
        name: "socket",
        x86_64: Some(41),
        aarch64: Some(198),
        cond: Cond::ArgNotIn {
            arg: 0,
            allowed: ALLOWED_FAMILIES,
        },
        errno: EPERM,
    },
    // Protocols (KRN-06 module autoload), low 32 bits of the protocol.
    Rule {
        name: "socket",
        x86_64: Some(41),
        aarch64: Some(198),
        cond: Cond::ArgNotIn {
            arg: 2,
            allowed: ALLOWED_PROTOCOLS,
        },
        errno: EPROTONOSUPPORT,
    },
    Rule {
        name: "socketpair",
        x86_64: Some(53),
        aarch64: Some(199),
        cond: Cond::ArgNotIn {
            arg: 0,
            allowed: SOCKETPAIR_FAMILIES,
        },
        errno: EPERM,
    },
];

/// A target architecture of the filter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arch {
    /// x86_64 (`AUDIT_ARCH_X86_64`).
    X86_64,
    /// aarch64 (`AUDIT_ARCH_AARCH64`).
    Aarch64,
}

impl Arch {
    fn nr(self, rule: &Rule) -> Option<u32> {
        match self {
            Arch::X86_64 => rule.x86_64,
            Arch::Aarch64 => rule.aarch64,
        }
    }
}

/// The filter could not be built (a jump would not fit in 8 bits).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BuildError(pub String);

impl fmt::Display for BuildError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "seccomp filter: {}", self.0)
    }
}

fn stmt(code: u16, k: u32) -> SockFilter {
    SockFilter {
        code,
        jt: 0,
        jf: 0,
        k,
    }
}

fn jump(code: u16, k: u32, jt: usize, jf: usize) -> Result<SockFilter, BuildError> {
    let jt = u8::try_from(jt).map_err(|_| BuildError(format!("jump {jt} too long")))?;
    let jf = u8::try_from(jf).map_err(|_| BuildError(format!("jump {jf} too long")))?;
    Ok(SockFilter { code, jt, jf, k })
}

fn ret_errno(errno: i32) -> SockFilter {
    stmt(BPF_RET_K, SECCOMP_RET_ERRNO | (errno as u32 & 0xffff))
}

fn arch_block(arch: Arch, rules: &[Rule]) -> Result<Vec<SockFilter>, BuildError> {
    let mut p = vec![stmt(BPF_LD_W_ABS, OFF_NR)];
    if arch == Arch::X86_64 {
        // x32 syscalls: nr >= 0x40000000.
        p.push(jump(BPF_JMP_JGE_K, X32_SYSCALL_BIT, 0, 1)?);
        p.push(ret_errno(ENOSYS));
    }
    for rule in rules {
        let Some(nr) = arch.nr(rule) else { continue };
        let action = ret_errno(rule.errno);
        match rule.cond {
            Cond::Always => {
                p.push(jump(BPF_JMP_JEQ_K, nr, 0, 1)?);
                p.push(action);
            }
            Cond::ArgMaskAny { arg, mask } => {
                p.push(jump(BPF_JMP_JEQ_K, nr, 0, 4)?);
                p.push(stmt(BPF_LD_W_ABS, off_arg_low(arg)));
                p.push(jump(BPF_JMP_JSET_K, mask, 0, 1)?);
                p.push(action);
                p.push(stmt(BPF_LD_W_ABS, OFF_NR));
            }
            Cond::ArgEqAny { arg, values } => {
                let n = values.len();
                p.push(jump(BPF_JMP_JEQ_K, nr, 0, n + 4)?);
                p.push(stmt(BPF_LD_W_ABS, off_arg_low(arg)));
                for (k, v) in values.iter().enumerate() {
                    p.push(jump(BPF_JMP_JEQ_K, *v, n - k, 0)?);
                }
                p.push(jump(BPF_JMP_JA, 1, 0, 0)?);
                p.push(action);
                p.push(stmt(BPF_LD_W_ABS, OFF_NR));
            }
            Cond::ArgNotIn { arg, allowed } => {
                let n = allowed.len();
                p.push(jump(BPF_JMP_JEQ_K, nr, 0, n + 3)?);
                p.push(stmt(BPF_LD_W_ABS, off_arg_low(arg)));
                for (k, v) in allowed.iter().enumerate() {
                    p.push(jump(BPF_JMP_JEQ_K, *v, n - k, 0)?);
                }
                p.push(action);
                p.push(stmt(BPF_LD_W_ABS, OFF_NR));
            }
        }
    }
    p.push(stmt(BPF_RET_K, SECCOMP_RET_ALLOW));
    Ok(p)
}

/// Builds the whole program: arch dispatch, then one block per supported architecture.
pub fn build(rules: &[Rule]) -> Result<Vec<SockFilter>, BuildError> {
    let x86 = arch_block(Arch::X86_64, rules)?;
    let arm = arch_block(Arch::Aarch64, rules)?;
    let mut p = vec![stmt(BPF_LD_W_ABS, OFF_ARCH)];
    // 1: jeq x86, jt -> 5 (x86 block), jf -> 2
    p.push(jump(BPF_JMP_JEQ_K, AUDIT_ARCH_X86_64, 3, 0)?);
    // 2: jeq arm, jt -> 4 (ja to arm block), jf -> 3 (kill)
    p.push(jump(BPF_JMP_JEQ_K, AUDIT_ARCH_AARCH64, 1, 0)?);
    // 3: kill
    p.push(stmt(BPF_RET_K, SECCOMP_RET_KILL_PROCESS));
    // 4: ja over the x86 block to the arm block
    p.push(stmt(
        BPF_JMP_JA,
        u32::try_from(x86.len()).map_err(|_| BuildError("too long".into()))?,
    ));
    // 5..: x86 block, then arm block
    p.extend(x86);
    p.extend(arm);
    if p.len() > 4096 {
        return Err(BuildError(format!(
            "{} instructions exceed BPF_MAXINSNS",
            p.len()
        )));
    }
    Ok(p)
}

/// The worker's filter.
pub fn worker_filter() -> Result<Vec<SockFilter>, BuildError> {
    build(RULES)
}

/// Runs a classic BPF seccomp program on a `seccomp_data` (tests and the probe's sanity
/// check). Supports exactly the instructions [`build`] emits.
#[must_use]
pub fn evaluate(prog: &[SockFilter], arch: u32, nr: u32, args: [u64; 6]) -> u32 {
    let mut data = [0u8; 64];
    data[0..4].copy_from_slice(&nr.to_le_bytes());
    data[4..8].copy_from_slice(&arch.to_le_bytes());
    for (i, a) in args.iter().enumerate() {
        data[16 + 8 * i..24 + 8 * i].copy_from_slice(&a.to_le_bytes());
    }
    let mut acc: u32 = 0;
    let mut pc = 0usize;
    while let Some(ins) = prog.get(pc) {
        pc += 1;
        match ins.code {
            BPF_LD_W_ABS => {
                let o = ins.k as usize;
                let Some(b) = data.get(o..o + 4) else {
                    return SECCOMP_RET_KILL_PROCESS;
                };
                acc = u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
            }
            BPF_JMP_JA => pc += ins.k as usize,
            BPF_JMP_JEQ_K | BPF_JMP_JGE_K | BPF_JMP_JSET_K => {
                let hit = match ins.code {
                    BPF_JMP_JEQ_K => acc == ins.k,
                    BPF_JMP_JGE_K => acc >= ins.k,
                    _ => acc & ins.k != 0,
                };
                pc += usize::from(if hit { ins.jt } else { ins.jf });
            }
            BPF_RET_K => return ins.k,
            _ => return SECCOMP_RET_KILL_PROCESS,
        }
    }
    SECCOMP_RET_KILL_PROCESS
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(arch: u32, nr: u32, args: [u64; 6]) -> u32 {
        evaluate(&worker_filter().unwrap(), arch, nr, args)
    }
    const X: u32 = AUDIT_ARCH_X86_64;
    const A: u32 = AUDIT_ARCH_AARCH64;
    const EPERM_RET: u32 = SECCOMP_RET_ERRNO | 1;
    const ENOSYS_RET: u32 = SECCOMP_RET_ERRNO | 38;

    #[test]
    fn other_architectures_are_killed() {
        for arch in [AUDIT_ARCH_I386, 0x4000_0028 /* arm */, 0, 0xffff_ffff] {
            assert_eq!(run(arch, 0, [0; 6]), SECCOMP_RET_KILL_PROCESS);
            assert_eq!(
                run(arch, 102, [1, 0, 0, 0, 0, 0]),
                SECCOMP_RET_KILL_PROCESS,
                "socketcall"
            );
        }
    }

    #[test]
    fn x32_is_denied() {
        assert_eq!(run(X, X32_SYSCALL_BIT | 41, [1, 1, 0, 0, 0, 0]), ENOSYS_RET);
        assert_eq!(run(X, X32_SYSCALL_BIT, [0; 6]), ENOSYS_RET);
        assert_eq!(run(X, 0xffff_ffff, [0; 6]), ENOSYS_RET);
    }

    #[test]
    fn every_unconditional_rule_denies_on_both_arches() {
        for rule in RULES.iter().filter(|r| r.cond == Cond::Always) {
            let want = SECCOMP_RET_ERRNO | rule.errno as u32;
            if let Some(nr) = rule.x86_64 {
                assert_eq!(run(X, nr, [0; 6]), want, "x86_64 {}", rule.name);
            }
            if let Some(nr) = rule.aarch64 {
                assert_eq!(run(A, nr, [0; 6]), want, "aarch64 {}", rule.name);
            }
        }
    }

    #[test]
    fn ordinary_syscalls_are_allowed() {
        // read, write, openat, execve, exit_group, clone(SIGCHLD), mmap
        for nr in [0, 1, 257, 59, 231, 9] {
            assert_eq!(run(X, nr, [0; 6]), SECCOMP_RET_ALLOW, "x86 {nr}");
        }
        for nr in [63, 64, 56, 221, 94, 222] {
            assert_eq!(run(A, nr, [0; 6]), SECCOMP_RET_ALLOW, "arm {nr}");
        }
        assert_eq!(
            run(X, 56, [0x0101_1200 | 17, 0, 0, 0, 0, 0]),
            SECCOMP_RET_ALLOW,
            "fork-like clone"
        );
        assert_eq!(run(A, 220, [17, 0, 0, 0, 0, 0]), SECCOMP_RET_ALLOW);
        // ioctl TCGETS, socket AF_INET/AF_INET6, socketpair AF_UNIX
        assert_eq!(run(X, 16, [0, 0x5401, 0, 0, 0, 0]), SECCOMP_RET_ALLOW);
        for fam in [2u64, 10] {
            assert_eq!(run(X, 41, [fam, 1, 0, 0, 0, 0]), SECCOMP_RET_ALLOW);
            assert_eq!(run(A, 198, [fam, 1, 0, 0, 0, 0]), SECCOMP_RET_ALLOW);
        }
        assert_eq!(run(X, 53, [1, 1, 0, 0, 0, 0]), SECCOMP_RET_ALLOW);
        assert_eq!(run(A, 199, [1, 1, 0, 0, 0, 0]), SECCOMP_RET_ALLOW);
    }

    #[test]
    fn clone_namespace_flags_are_masked_in_32_bits() {
        for flag in [
            0x0002_0000u64,
            0x1000_0000,
            0x2000_0000,
            0x4000_0000,
            0x0800_0000,
        ] {
            assert_eq!(
                run(X, 56, [flag | 17, 0, 0, 0, 0, 0]),
                EPERM_RET,
                "{flag:#x}"
            );
            assert_eq!(run(X, 56, [flag | (1 << 40), 0, 0, 0, 0, 0]), EPERM_RET);
            assert_eq!(run(A, 220, [flag, 0, 0, 0, 0, 0]), EPERM_RET);
        }
        assert_eq!(run(X, 435, [0; 6]), ENOSYS_RET, "clone3");
        assert_eq!(
            run(X, 272, [0x1001_0000000, 0, 0, 0, 0, 0]),
            EPERM_RET,
            "unshare high bit"
        );
        assert_eq!(run(X, 272, [0, 0, 0, 0, 0, 0]), EPERM_RET, "unshare(0)");
    }

    #[test]
    fn ioctl_terminal_injection_low_32_bits() {
        for cmd in [TIOCSTI, TIOCLINUX, TIOCCONS, TIOCSETD] {
            let c = u64::from(cmd);
            assert_eq!(run(X, 16, [0, c, 0, 0, 0, 0]), EPERM_RET);
            assert_eq!(
                run(X, 16, [0, c | (1 << 32), 0, 0, 0, 0]),
                EPERM_RET,
                "64-bit variant"
            );
            assert_eq!(
                run(A, 29, [0, c | (0xffff_ffff << 32), 0, 0, 0, 0]),
                EPERM_RET
            );
        }
    }

    #[test]
    fn socket_protocols_that_autoload_modules_are_refused() {
        const NOPROTO: u32 = SECCOMP_RET_ERRNO | 93;
        // SCTP, DCCP, UDP-Lite, MPTCP, L2TP over IP, and 132 with a high bit set.
        for proto in [132u64, 33, 136, 262, 115, 132 | (1 << 32)] {
            assert_eq!(run(X, 41, [2, 1, proto, 0, 0, 0]), NOPROTO, "{proto}");
            assert_eq!(run(A, 198, [10, 1, proto, 0, 0, 0]), NOPROTO, "{proto}");
        }
        // Control: what programs use stays allowed (and a high bit is truncated away).
        for (fam, ty, proto) in [
            (2u64, 1u64, 0u64),
            (2, 1, 6),
            (10, 2, 17),
            (2, 2, 1),
            (10, 2, 58),
        ] {
            assert_eq!(run(X, 41, [fam, ty, proto, 0, 0, 0]), SECCOMP_RET_ALLOW);
            assert_eq!(run(A, 198, [fam, ty, proto, 0, 0, 0]), SECCOMP_RET_ALLOW);
        }
        assert_eq!(
            run(X, 41, [2, 1, 6 | (1 << 32), 0, 0, 0]),
            SECCOMP_RET_ALLOW
        );
    }

    #[test]
    fn socket_families_are_an_allowlist_on_32_bits() {
        // AF_UNIX sockets: a pathname connect cannot be checked (NET-05).
        assert_eq!(run(X, 41, [1, 1, 0, 0, 0, 0]), EPERM_RET, "socket(AF_UNIX)");
        assert_eq!(
            run(A, 198, [1, 2, 0, 0, 0, 0]),
            EPERM_RET,
            "socket(AF_UNIX)"
        );
        assert_eq!(run(X, 41, [1 | (1 << 32), 1, 0, 0, 0, 0]), EPERM_RET);
        assert_eq!(
            run(X, 53, [2, 1, 0, 0, 0, 0]),
            EPERM_RET,
            "socketpair(AF_INET)"
        );
        for fam in [
            16u64, /* netlink */
            17,    /* packet */
            40,    /* vsock */
            3, 4, 5, 9, 21, 29, 38, 44,
        ] {
            assert_eq!(run(X, 41, [fam, 1, 0, 0, 0, 0]), EPERM_RET, "{fam}");
            assert_eq!(run(A, 198, [fam, 1, 0, 0, 0, 0]), EPERM_RET, "{fam}");
            assert_eq!(run(X, 53, [fam, 1, 0, 0, 0, 0]), EPERM_RET, "{fam}");
        }
        assert_eq!(
            run(X, 41, [40 | (1 << 32), 1, 0, 0, 0, 0]),
            EPERM_RET,
            "AF_VSOCK|1<<32"
        );
        // A high bit on an allowed family: the kernel truncates to int, so it is AF_INET.
        assert_eq!(
            run(X, 41, [2 | (1 << 32), 1, 0, 0, 0, 0]),
            SECCOMP_RET_ALLOW
        );
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn x86_64_numbers_match_libc() {
        let by_name = |n: &str| {
            RULES
                .iter()
                .find(|r| r.name == n)
                .and_then(|r| r.x86_64)
                .map(i64::from)
        };
        let pairs: &[(&str, libc::c_long)] = &[
            ("mount", libc::SYS_mount),
            ("umount2", libc::SYS_umount2),
            ("pivot_root", libc::SYS_pivot_root),
            ("move_mount", libc::SYS_move_mount),
            ("open_tree", libc::SYS_open_tree),
            ("fsopen", libc::SYS_fsopen),
            ("fsconfig", libc::SYS_fsconfig),
            ("fsmount", libc::SYS_fsmount),
            ("fspick", libc::SYS_fspick),
            ("mount_setattr", libc::SYS_mount_setattr),
            ("unshare", libc::SYS_unshare),
            ("setns", libc::SYS_setns),
            ("clone", libc::SYS_clone),
            ("clone3", libc::SYS_clone3),
            ("ptrace", libc::SYS_ptrace),
            ("process_vm_readv", libc::SYS_process_vm_readv),
            ("process_vm_writev", libc::SYS_process_vm_writev),
            ("bpf", libc::SYS_bpf),
            ("perf_event_open", libc::SYS_perf_event_open),
            ("userfaultfd", libc::SYS_userfaultfd),
            ("io_uring_setup", libc::SYS_io_uring_setup),
            ("keyctl", libc::SYS_keyctl),
            ("add_key", libc::SYS_add_key),
            ("request_key", libc::SYS_request_key),
            ("kexec_load", libc::SYS_kexec_load),
            ("kexec_file_load", libc::SYS_kexec_file_load),
            ("init_module", libc::SYS_init_module),
            ("finit_module", libc::SYS_finit_module),
            ("delete_module", libc::SYS_delete_module),
            ("open_by_handle_at", libc::SYS_open_by_handle_at),
            ("name_to_handle_at", libc::SYS_name_to_handle_at),
            ("ioctl", libc::SYS_ioctl),
            ("socket", libc::SYS_socket),
            ("socketpair", libc::SYS_socketpair),
            ("pidfd_getfd", libc::SYS_pidfd_getfd),
            ("kcmp", libc::SYS_kcmp),
            ("reboot", libc::SYS_reboot),
            ("acct", libc::SYS_acct),
            ("chroot", libc::SYS_chroot),
        ];
        for (name, nr) in pairs {
            assert_eq!(by_name(name), Some(*nr), "{name}");
        }
    }

    #[test]
    fn program_fits() {
        let p = worker_filter().unwrap();
        assert!(p.len() < 1024, "{}", p.len());
    }
}
