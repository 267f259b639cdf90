//! corral as a library inside a program whose other threads come and go while the executor
//! probes (a test harness, a thread pool). An exiting thread is not moved with its process
//! and keeps its cgroup populated, invisibly, until its last context switch (Linux 6.19+
//! defers that unlink). Had systemd moved corral itself into its new scope, a thread of
//! corral exiting as corral moved on into its leaf would stay in the scope, and enabling the
//! scope's controllers would fail with EBUSY while `cgroup.procs` lists nothing (CI, 7.3,
//! systemd-service). systemd moves corral's stand-in instead, and corral's threads never
//! enter the scope itself. Run alone in a `Delegate=yes` cgroup (`cargo xtask vm --layout
//! service -- <this binary>`), corral moves out of that cgroup into a leaf of it, and an
//! exiting thread stays behind in the cgroup whose controllers corral enables: there corral
//! waits for it (ADR-0011, 2026-12-04). The threads that exit here run at the lowest
//! priority beside two busy ones, so an exiting one may wait long for its last context
//! switch, as a thread does on a loaded host or an emulated CPU. One test per binary: the executor must be probed for
//! the first time here, beside the churning thread.
#![allow(
    unsafe_code,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code"
)]
mod mode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

#[test]
fn a_probe_beside_threads_that_keep_exiting_gets_every_capability() {
    let stop = Arc::new(AtomicBool::new(false));
    let exited = Arc::new(AtomicUsize::new(0));
    let churn = {
        let (stop, exited) = (Arc::clone(&stop), Arc::clone(&exited));
        std::thread::spawn(move || {
            while !stop.load(Ordering::SeqCst) {
                // Not joined at once: the next starts while this one is still exiting.
                let t = std::thread::spawn(|| {
                    // SAFETY: setpriority on this thread's own id; lowering one's own priority
                    // needs no privilege.
                    let rc = unsafe {
                        libc::setpriority(libc::PRIO_PROCESS, libc::gettid().unsigned_abs(), 19)
                    };
                    assert_eq!(rc, 0, "setpriority: {}", std::io::Error::last_os_error());
                });
                std::thread::yield_now();
                t.join().unwrap();
                exited.fetch_add(1, Ordering::SeqCst);
            }
        })
    };
    let busy: Vec<_> = (0..2)
        .map(|_| {
            let stop = Arc::clone(&stop);
            std::thread::spawn(move || {
                while !stop.load(Ordering::SeqCst) {
                    std::hint::spin_loop();
                }
            })
        })
        .collect();
    // The control: threads are exiting before the probe starts and while it runs.
    while exited.load(Ordering::SeqCst) < 3 {
        std::thread::yield_now();
    }
    let before = exited.load(Ordering::SeqCst);
    let exe = corral_linux::LinuxSandboxExecutor::new();
    let during = exited.load(Ordering::SeqCst) - before;
    stop.store(true, Ordering::SeqCst);
    churn.join().unwrap();
    for b in busy {
        b.join().unwrap();
    }
    let caps = &exe.probe_report().capabilities;
    assert!(caps.missing().is_empty(), "{caps:#?}");
    assert!(during > 0, "no thread exited while the executor probed");
    println!("{during} threads exited while the executor probed");
}
