#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code"
)]
mod common;
mod mode;
use common::*;
use corral_contract::manifest::Termination;

#[test]
fn true_runs_and_writes_land_in_upper() {
    let ws = Workspace::new("smoke");
    let o = Case::sh("echo hello; id; echo new > src/new.rs; cat /etc/passwd; ls -la / /workspace /dev; cat /proc/self/status | grep -E 'Cap|NoNew|Seccomp'; echo x > README; echo y > /tmp/t && cat /tmp/t").run(&ws);
    println!("{}\n---\n{}", text(&o.stdout.bytes), text(&o.stderr.bytes));
    println!(
        "{:?} {:?} {:?} wall={} cpu={} peak={} notes={:?}",
        o.termination, o.exit_code, o.signal, o.wall_ms, o.cpu_ms, o.peak_memory_bytes, o.notes
    );
    let layer = o.workspace.as_ref().unwrap();
    let up = layer.upper_path();
    println!(
        "upper: {:?}",
        std::fs::read_dir(&up)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect::<Vec<_>>()
    );
    assert_eq!(
        std::fs::read_to_string(up.join("src/new.rs")).unwrap(),
        "new\n"
    );
    assert_eq!(o.termination, Termination::Exited);
    assert_gone(&o);
}

/// The worker's passwd entry names bash as its login shell where the host has it (agents run
/// commands through it: codex's `sh -lc` is the passwd shell), else sh.
#[test]
fn the_login_shell_is_bash_where_it_exists() {
    let ws = Workspace::new("shell");
    let o = Case::sh("grep '^corral:' /etc/passwd").run(&ws);
    let line = text(&o.stdout.bytes);
    assert_eq!(o.exit_code, Some(0), "{line}{}", text(&o.stderr.bytes));
    let want = if std::path::Path::new("/bin/bash").is_file() {
        ":/bin/bash"
    } else {
        ":/bin/sh"
    };
    assert!(line.trim_end().ends_with(want), "{line}");
    assert_gone(&o);
}
