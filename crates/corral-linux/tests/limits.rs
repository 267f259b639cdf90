//! Adversarial resource tests: fork bomb, CPU burn, memory balloons (anon, tmpfs/shm),
//! disk fill (plain, sparse, unlinked-open). Each with a positive control.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code"
)]
mod common;
mod mode;
use std::time::{Duration, Instant};

use common::*;
use corral_contract::manifest::Termination;

fn forks(out: &str) -> u32 {
    out.split_whitespace()
        .nth(1)
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

#[test]
fn fork_bomb_hits_pids_max_and_ends_cleanly() {
    let ws = Workspace::new("forkbomb");
    let mut c = Case::attack(&["forkbomb"]);
    c.budget.procs = 16;
    let o = c.run(&ws);
    let out = text(&o.stdout.bytes);
    assert_eq!(o.exit_code, Some(0), "{out}");
    assert!(out.contains("EAGAIN") && forks(&out) < 16, "{out}");
    assert_gone(&o);
    // Positive control: with a larger budget the same helper forks more (the cap stopped it).
    let mut c = Case::attack(&["forkbomb"]);
    c.budget.procs = 64;
    let o = c.run(&ws);
    let out2 = text(&o.stdout.bytes);
    assert!(forks(&out2) > forks(&out) + 20, "{out} vs {out2}");
    assert_gone(&o);
}

#[test]
fn cpu_burn_ends_with_cpu_limit() {
    let ws = Workspace::new("cpu");
    let mut c = Case::attack(&["burn", "2"]);
    c.budget.cpu = 1;
    c.budget.wall = 15;
    let t = Instant::now();
    let o = c.run(&ws);
    assert_eq!(
        o.termination,
        Termination::CpuLimit,
        "{:?} {:?}",
        o.signal,
        o.notes
    );
    assert!(o.cpu_ms >= 900, "{}", o.cpu_ms);
    // Ended by the CPU ceiling, well before the wall budget would have.
    assert!(t.elapsed() < Duration::from_secs(15), "{:?}", t.elapsed());
    assert_gone(&o);
    // Positive control: a short job under the same limit exits normally.
    let mut c = Case::sh("i=0; while [ $i -lt 2000 ]; do i=$((i+1)); done; echo done");
    c.budget.cpu = 1;
    let o = c.run(&ws);
    assert_eq!(o.termination, Termination::Exited);
    assert_gone(&o);
}

#[test]
fn anonymous_memory_balloon_is_oom_killed_in_its_cgroup() {
    let ws = Workspace::new("mem");
    let mut c = Case::attack(&["balloon", "256"]);
    c.budget.mem = 64 << 20;
    let o = c.run(&ws);
    assert_eq!(
        o.termination,
        Termination::MemoryLimit,
        "{:?} {}",
        o.notes,
        text(&o.stdout.bytes)
    );
    assert!(o.peak_memory_bytes <= 64 << 20, "{}", o.peak_memory_bytes);
    assert_gone(&o);
    // Positive control: the same balloon fits a larger limit.
    let mut c = Case::attack(&["balloon", "32"]);
    c.budget.mem = 256 << 20;
    let o = c.run(&ws);
    assert_eq!(o.termination, Termination::Exited, "{:?}", o.notes);
    assert!(text(&o.stdout.bytes).contains("BALLOON OK 32"));
    assert_gone(&o);
}

#[test]
fn shm_and_tmp_pages_are_charged_to_the_sandbox() {
    let ws = Workspace::new("shm");
    let mut c = Case::sh("head -c 200000000 /dev/zero > /dev/shm/fill; echo rc=$?");
    c.budget.mem = 64 << 20;
    c.budget.disk = 512 << 20;
    let o = c.run(&ws);
    assert_eq!(
        o.termination,
        Termination::MemoryLimit,
        "{:?} {}",
        o.notes,
        text(&o.stdout.bytes)
    );
    assert_gone(&o);
    let mut c = Case::sh("head -c 20000000 /dev/zero > /tmp/fill; echo rc=$?");
    c.budget.mem = 256 << 20;
    let o = c.run(&ws);
    assert!(text(&o.stdout.bytes).contains("rc=0"), "control");
    assert!(
        o.peak_memory_bytes >= 20_000_000,
        "tmpfs pages are charged: {}",
        o.peak_memory_bytes
    );
    assert_gone(&o);
}

#[test]
fn disk_fill_sparse_and_unlinked_files_hit_enospc() {
    let ws = Workspace::new("disk");
    for (path, mode) in [
        ("/workspace/src/big", "plain"),
        ("/tmp/sparse", "sparse"),
        ("/home/corral/gone", "unlinked"),
        ("/dev/shm/x", "plain"),
    ] {
        let mut c = Case::attack(&["fill", path, mode]);
        c.budget.disk = 16 << 20;
        c.budget.mem = 512 << 20;
        let o = c.run(&ws);
        let out = text(&o.stdout.bytes);
        assert!(
            out.contains("ENOSPC"),
            "{path} {mode}: {out} {:?}",
            o.termination
        );
        let mib: u64 = out.split_whitespace().nth(2).unwrap().parse().unwrap();
        assert!(mib <= 16, "{path}: {out}");
        assert_gone(&o);
    }
    assert!(
        !ws.path.join("src/big").exists(),
        "host workspace untouched"
    );
    // Positive control: under the cap, writing works.
    let mut c = Case::sh("head -c 4000000 /dev/zero > src/ok && echo WROTE");
    c.budget.disk = 16 << 20;
    let o = c.run(&ws);
    assert!(text(&o.stdout.bytes).contains("WROTE"));
    assert_eq!(
        std::fs::metadata(o.workspace.as_ref().unwrap().upper_path().join("src/ok"))
            .unwrap()
            .len(),
        4_000_000
    );
    assert_gone(&o);
}
