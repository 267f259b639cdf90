//! `cargo bench -p corral-linux --bench seccomp_filter`: the worker's seccomp filter
//! (`seccomp::worker_filter`, hand-built from the rule table) side by side with the same table
//! expressed with seccompiler, the design card's crate (ADR-0011, issue 16). seccompiler gives
//! one errno per program, so the table becomes one program per errno (EPERM, ENOSYS,
//! EPROTONOSUPPORT) plus the x32 program it cannot express; "any bit of the mask set" becomes
//! one rule per bit.
//!
//! Each variant is installed in a forked child that times system calls the filter must
//! evaluate on every call (`ioctl(FIONREAD)`, `socket(AF_INET, SOCK_DGRAM)` + `close`) and one
//! it need not (`getppid`: since Linux 5.11 the kernel caches an argument-free allow), then
//! checks that both refuse the same calls with the same errno (else the comparison is void).
//! Prints instruction counts, medians over interleaved rounds and the ratio. x86_64 only.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::print_stdout,
    unsafe_code,
    reason = "benchmark: fork, prctl and seccomp in a child"
)]

use std::collections::BTreeMap;
use std::time::Instant;

use corral_linux::seccomp::{self, Cond, RULES};

type Program = Vec<libc::sock_filter>;

#[cfg(target_arch = "x86_64")]
fn seccompiler_programs() -> Vec<Program> {
    use seccompiler::{
        SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
        SeccompRule, TargetArch,
    };
    let cond = |arg: u8, op, v: u32| {
        SeccompCondition::new(arg, SeccompCmpArgLen::Dword, op, u64::from(v)).unwrap()
    };
    let mut by_errno: BTreeMap<i32, BTreeMap<i64, Vec<SeccompRule>>> = BTreeMap::new();
    for r in RULES {
        let Some(nr) = r.x86_64 else { continue };
        let rules: Vec<SeccompRule> = match r.cond {
            Cond::Always => vec![],
            Cond::ArgMaskAny { arg, mask } => (0..32)
                .map(|b| 1u32 << b)
                .filter(|bit| mask & bit != 0)
                .map(|bit| {
                    SeccompRule::new(vec![cond(arg, SeccompCmpOp::MaskedEq(u64::from(bit)), bit)])
                        .unwrap()
                })
                .collect(),
            Cond::ArgEqAny { arg, values } => values
                .iter()
                .map(|v| SeccompRule::new(vec![cond(arg, SeccompCmpOp::Eq, *v)]).unwrap())
                .collect(),
            Cond::ArgNotIn { arg, allowed } => vec![
                SeccompRule::new(
                    allowed
                        .iter()
                        .map(|v| cond(arg, SeccompCmpOp::Ne, *v))
                        .collect(),
                )
                .unwrap(),
            ],
        };
        by_errno
            .entry(r.errno)
            .or_default()
            .entry(i64::from(nr))
            .or_default()
            .extend(rules);
    }
    let mut out: Vec<Program> = by_errno
        .into_iter()
        .map(|(errno, rules)| {
            let f = SeccompFilter::new(
                rules,
                SeccompAction::Allow,
                SeccompAction::Errno(u32::try_from(errno).unwrap()),
                TargetArch::x86_64,
            )
            .unwrap();
            let p: seccompiler::BpfProgram = f.try_into().unwrap();
            p.iter()
                .map(|i| sock_filter(i.code, i.jt, i.jf, i.k))
                .collect()
        })
        .collect();
    // x32 shares AUDIT_ARCH_X86_64 and seccompiler has no condition on the number's x32 bit:
    // the same hand-written program corral-checkout adds to its seccompiler filters.
    let f = |code: u32, jt, jf, k| sock_filter(u16::try_from(code).unwrap(), jt, jf, k);
    out.push(vec![
        f(libc::BPF_LD | libc::BPF_W | libc::BPF_ABS, 0, 0, 4),
        f(
            libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K,
            0,
            3,
            seccomp::AUDIT_ARCH_X86_64,
        ),
        f(libc::BPF_LD | libc::BPF_W | libc::BPF_ABS, 0, 0, 0),
        f(
            libc::BPF_JMP | libc::BPF_JGE | libc::BPF_K,
            0,
            1,
            seccomp::X32_SYSCALL_BIT,
        ),
        f(
            libc::BPF_RET | libc::BPF_K,
            0,
            0,
            seccomp::SECCOMP_RET_ERRNO | 38,
        ),
        f(
            libc::BPF_RET | libc::BPF_K,
            0,
            0,
            seccomp::SECCOMP_RET_ALLOW,
        ),
    ]);
    out
}

fn sock_filter(code: u16, jt: u8, jf: u8, k: u32) -> libc::sock_filter {
    libc::sock_filter { code, jt, jf, k }
}

fn corral_program() -> Program {
    seccomp::worker_filter()
        .unwrap()
        .iter()
        .map(|i| sock_filter(i.code, i.jt, i.jf, i.k))
        .collect()
}

/// ns per call of each probe, and the errnos of the refusals, from a forked child.
#[derive(Debug, Clone, PartialEq)]
struct Sample {
    getppid: f64,
    ioctl: f64,
    socket: f64,
    refusals: [i32; 5],
}

fn measure(progs: &[Program], n: u32) -> Sample {
    let mut pipe = [0i32; 2];
    // SAFETY: pipe(2) writes two descriptors into the array.
    assert_eq!(unsafe { libc::pipe(pipe.as_mut_ptr()) }, 0);
    // SAFETY: the bench is single-threaded here; the child only makes system calls, formats
    // into a stack buffer's worth of text and exits with _exit.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0);
    if pid == 0 {
        // SAFETY: (whole block) the child: installs the filters, makes the probes, writes
        // the result to the pipe and exits.
        unsafe {
            assert_eq!(libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), 0);
            for p in progs {
                let prog = libc::sock_fprog {
                    len: u16::try_from(p.len()).unwrap(),
                    filter: p.as_ptr().cast_mut(),
                };
                assert_eq!(
                    libc::syscall(libc::SYS_seccomp, 1, 0, std::ptr::from_ref(&prog)),
                    0
                );
            }
            let fd = libc::open(c"/dev/null".as_ptr(), libc::O_RDONLY);
            // The best of three passes: the first pays for warming caches and frequency.
            let best = |n: u32, f: &mut dyn FnMut()| {
                (0..3)
                    .map(|_| {
                        let t = Instant::now();
                        for _ in 0..n {
                            f();
                        }
                        t.elapsed().as_nanos() as f64 / f64::from(n)
                    })
                    .fold(f64::MAX, f64::min)
            };
            let getppid = best(n, &mut || {
                libc::getppid();
            });
            let mut v: libc::c_int = 0;
            let ioctl = best(n, &mut || {
                libc::ioctl(fd, libc::FIONREAD, &raw mut v);
            });
            let socket = best(n / 10, &mut || {
                libc::close(libc::socket(libc::AF_INET, libc::SOCK_DGRAM, 0));
            });
            let errno = |r: i64| if r < 0 { *libc::__errno_location() } else { 0 };
            let clone = libc::syscall(
                libc::SYS_clone,
                (libc::CLONE_NEWUSER | libc::SIGCHLD) as libc::c_ulong,
                0,
                0,
                0,
                0,
            );
            if clone == 0 {
                libc::_exit(0);
            }
            let clone_errno = errno(clone);
            let refusals = [
                errno(i64::from(libc::socket(libc::AF_UNIX, libc::SOCK_STREAM, 0))),
                errno(i64::from(libc::socket(
                    libc::AF_INET,
                    libc::SOCK_STREAM,
                    132,
                ))),
                errno(libc::syscall(
                    libc::SYS_umount2,
                    c"/nonexistent".as_ptr(),
                    0,
                )),
                errno(libc::syscall(libc::SYS_getppid | 0x4000_0000)),
                clone_errno,
            ];
            let line = format!(
                "{getppid} {ioctl} {socket} {} {} {} {} {}\n",
                refusals[0], refusals[1], refusals[2], refusals[3], refusals[4]
            );
            libc::write(pipe[1], line.as_ptr().cast(), line.len());
            libc::_exit(0);
        }
    }
    // SAFETY: the parent's end of the pipe and the child's pid are ours.
    unsafe {
        libc::close(pipe[1]);
        let mut st = 0;
        libc::waitpid(pid, &raw mut st, 0);
    }
    let mut buf = [0u8; 256];
    // SAFETY: reads at most buf.len() bytes into buf.
    let got = unsafe { libc::read(pipe[0], buf.as_mut_ptr().cast(), buf.len()) };
    // SAFETY: our descriptor.
    unsafe { libc::close(pipe[0]) };
    let text = String::from_utf8_lossy(&buf[..usize::try_from(got).unwrap()]).into_owned();
    let f: Vec<f64> = text
        .split_whitespace()
        .map(|x| x.parse().unwrap())
        .collect();
    Sample {
        getppid: f[0],
        ioctl: f[1],
        socket: f[2],
        refusals: [f[3], f[4], f[5], f[6], f[7]].map(|x| x as i32),
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

#[cfg(target_arch = "x86_64")]
fn main() {
    const ROUNDS: usize = 7;
    const N: u32 = 1_000_000;
    let ours = corral_program();
    let theirs = seccompiler_programs();
    let sizes: Vec<usize> = theirs.iter().map(Vec::len).collect();
    println!(
        "instructions: corral {} (one program, x86_64 and aarch64); seccompiler {} in {} \
         programs {sizes:?} (x86_64 only)",
        ours.len(),
        sizes.iter().sum::<usize>(),
        sizes.len()
    );
    let variants: [(&str, Vec<Program>); 3] = [
        ("no filter", vec![]),
        ("corral", vec![ours]),
        ("seccompiler", theirs),
    ];
    let mut samples: BTreeMap<&str, Vec<Sample>> = BTreeMap::new();
    for _ in 0..ROUNDS {
        for (name, progs) in &variants {
            samples.entry(name).or_default().push(measure(progs, N));
        }
    }
    let (a, b) = (&samples["corral"], &samples["seccompiler"]);
    assert_eq!(
        a[0].refusals, b[0].refusals,
        "the two filters refuse differently: the comparison is void"
    );
    println!(
        "refusals (errno of socket(AF_UNIX), socket(SCTP), umount2, x32 getppid, \
         clone(NEWUSER)): {:?}",
        a[0].refusals
    );
    println!("ns per call, median of {ROUNDS} interleaved rounds (each the best of 3 passes):");
    let med = |name: &str, f: fn(&Sample) -> f64| median(samples[name].iter().map(f).collect());
    for (probe, f) in [
        ("getppid", (|s: &Sample| s.getppid) as fn(&Sample) -> f64),
        ("ioctl(FIONREAD)", |s: &Sample| s.ioctl),
        ("socket+close", |s: &Sample| s.socket),
    ] {
        let (none, c, s) = (med("no filter", f), med("corral", f), med("seccompiler", f));
        println!(
            "  {probe:16} no filter {none:8.1}  corral {c:8.1} (+{:6.1})  seccompiler {s:8.1} \
             (+{:6.1})  overhead ratio seccompiler/corral {:.2}",
            c - none,
            s - none,
            (s - none) / (c - none).max(0.1)
        );
    }
}

#[cfg(not(target_arch = "x86_64"))]
fn main() {
    println!("seccomp_filter: x86_64 only");
}
