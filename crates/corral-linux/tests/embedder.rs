//! corral as a library inside a program whose other threads start processes while the
//! executor probes. Under systemd, corral first gets a scope (systemd moves only corral's
//! pid) and then moves itself into a leaf of it; a child another thread forked between the
//! two lands in the scope and, unless corral moves it too, blocks the controllers: every
//! capability was withdrawn that way in a 6.12 guest (the egress tests' `ip`). One test per
//! binary: the executor must be probed for the first time here, beside the forking thread.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code"
)]
mod mode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

#[test]
fn a_probe_beside_a_thread_that_keeps_forking_gets_every_capability() {
    let stop = Arc::new(AtomicBool::new(false));
    let forks = Arc::new(AtomicUsize::new(0));
    let forker = {
        let (stop, forks) = (Arc::clone(&stop), Arc::clone(&forks));
        std::thread::spawn(move || {
            let mut children = Vec::new();
            while !stop.load(Ordering::SeqCst) {
                children.push(
                    std::process::Command::new("sleep")
                        .arg("1")
                        .spawn()
                        .unwrap(),
                );
                forks.fetch_add(1, Ordering::SeqCst);
            }
            for mut c in children {
                c.wait().unwrap();
            }
        })
    };
    // The control: the thread is forking before the probe starts and while it runs.
    while forks.load(Ordering::SeqCst) < 3 {
        std::thread::yield_now();
    }
    let before = forks.load(Ordering::SeqCst);
    let exe = corral_linux::LinuxSandboxExecutor::new();
    let during = forks.load(Ordering::SeqCst) - before;
    stop.store(true, Ordering::SeqCst);
    forker.join().unwrap();
    let caps = &exe.probe_report().capabilities;
    assert!(caps.missing().is_empty(), "{caps:#?}");
    assert!(during > 0, "no fork happened while the executor probed");
    println!("{during} processes started while the executor probed");
}
