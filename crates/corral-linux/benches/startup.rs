//! `cargo bench -p corral-linux`: time to start `/bin/true` plainly, under
//! `bwrap --unshare-all`, and in the full corral sandbox (all namespaces, cgroup, size-capped
//! tmpfs with an idmapped overlay workspace, Landlock, seccomp). Prints medians and the
//! ratio corral/bwrap. Needs `bwrap` (bubblewrap). As root it measures root mode; as an
//! ordinary user on a host rootless mode runs on (ADR-0080), rootless mode against bwrap run
//! by the same user (`tests/guest/bench-rootless.sh` runs both in a guest).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::print_stdout,
    reason = "benchmark"
)]

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use corral_admission::admit;
use corral_contract::{AgentPreset, WorkUnit};
use corral_linux::LinuxSandboxExecutor;
use corral_sandbox::{CancelToken, execute_admitted};

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn time<F: FnMut()>(n: usize, mut f: F) -> Duration {
    for _ in 0..3 {
        f();
    }
    median(
        (0..n)
            .map(|_| {
                let t = Instant::now();
                f();
                t.elapsed()
            })
            .collect(),
    )
}

fn main() {
    // As corral's main does: the mode is chosen while this process has one thread.
    corral_linux::rootless::choose_mode();
    println!("mode: {}", corral_linux::rootless::mode());
    let n = 50;
    let plain = time(n, || {
        assert!(
            std::process::Command::new("/bin/true")
                .status()
                .unwrap()
                .success()
        );
    });
    let bwrap_path = ["/usr/bin/bwrap", "/bin/bwrap"]
        .into_iter()
        .find(|p| std::path::Path::new(p).exists());
    let bwrap = bwrap_path.map(|b| {
        time(n, || {
            let st = std::process::Command::new(b)
                .args([
                    "--unshare-all",
                    "--ro-bind",
                    "/usr",
                    "/usr",
                    "--symlink",
                    "usr/lib",
                    "/lib",
                    "--symlink",
                    "usr/lib64",
                    "/lib64",
                    "--symlink",
                    "usr/bin",
                    "/bin",
                    "--proc",
                    "/proc",
                    "--dev",
                    "/dev",
                    "--die-with-parent",
                    "/bin/true",
                ])
                .status()
                .unwrap();
            assert!(st.success());
        })
    });
    let exe = LinuxSandboxExecutor::new();
    let missing = exe.probe_report().capabilities.missing();
    assert!(missing.is_empty(), "capabilities missing: {missing:?}");
    let ws = std::env::temp_dir().join(format!("corral-bench-ws-{}", std::process::id()));
    std::fs::create_dir_all(ws.join("src")).unwrap();
    let wu: WorkUnit = serde_json::from_value(serde_json::json!({
        "schema_version": "corral.work-unit/v1", "id": "bench", "objective": "bench",
        "repository": { "base_sha": "0123456789abcdef0123456789abcdef01234567" },
        "security": { "sandbox_required": true },
        "permissions": { "process_execution": true, "secrets": [], "network": "none",
            "network_allowlist": [], "filesystem_write": ["src/"] },
        "budget": { "wall_seconds": 10, "cpu_seconds": 10, "memory_bytes": 268435456,
            "disk_bytes": 67108864, "max_processes": 64, "max_output_bytes": 65536, "max_patch_bytes": 65536 },
        "constraints": { "allowed_paths": ["src/"], "forbidden_paths": [] }
    }))
    .unwrap();
    let preset: AgentPreset = serde_json::from_value(serde_json::json!({
        "schema_version": "corral.agent-preset/v1", "id": "bench", "executable": "/usr/bin/true",
        "argv": [], "prompt_transport": { "kind": "argument", "flag": "--objective" }, "env_allowlist": [],
        "network_policy": "disabled", "authority": "candidate_only"
    }))
    .unwrap();
    let run = admit(&wu, &preset, None, &BTreeMap::new()).unwrap();
    let cancel = CancelToken::new().unwrap();
    let corral = time(n, || {
        let o = execute_admitted(&exe, &run, &ws, &cancel).unwrap();
        assert_eq!(o.exit_code, Some(0), "{o:?}");
    });
    let _ = std::fs::remove_dir_all(&ws);
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    println!("startup of /bin/true, median of {n}:");
    println!("  plain exec          {:8.3} ms", ms(plain));
    match bwrap {
        Some(b) => println!("  bwrap --unshare-all {:8.3} ms", ms(b)),
        None => println!("  bwrap --unshare-all      n/a (install bubblewrap)"),
    }
    println!("  corral sandbox      {:8.3} ms", ms(corral));
    if let Some(b) = bwrap {
        println!("  ratio corral/bwrap  {:8.3}", ms(corral) / ms(b));
    }
}
