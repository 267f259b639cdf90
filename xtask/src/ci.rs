//! `cargo xtask ci`: the complete test sequence (README.md's test command).

use std::path::Path;
use std::process::Command;
use std::time::Instant;

use anyhow::{Context, Result, bail};

fn step(root: &Path, name: &str, program: &str, args: &[&str]) -> Result<()> {
    let t = Instant::now();
    println!("==> {name}: {program} {}", args.join(" "));
    let status = Command::new(program)
        .args(args)
        .current_dir(root)
        .status()
        .with_context(|| format!("starting {program}"))?;
    println!("    ({:.0} s)", t.elapsed().as_secs_f64());
    if !status.success() {
        bail!("step `{name}` failed ({status})");
    }
    Ok(())
}

/// Cargo unpacks each packaged crate from its temporary local registry into
/// `$CARGO_HOME/registry/src/<registry>/<name>-<version>` and, finding that folder on a later
/// run, builds the old copy: the packaging step would then check stale sources. Removes
/// corral's own unpacked crates (our names at our version) so each run unpacks what it packed.
fn forget_packaged_sources() -> Result<()> {
    let home = match std::env::var_os("CARGO_HOME") {
        Some(h) => std::path::PathBuf::from(h),
        None => std::path::PathBuf::from(std::env::var_os("HOME").context("HOME is not set")?)
            .join(".cargo"),
    };
    let suffix = format!("-{}", env!("CARGO_PKG_VERSION"));
    let Ok(registries) = std::fs::read_dir(home.join("registry/src")) else {
        return Ok(());
    };
    for registry in registries {
        let registry = registry?.path();
        for entry in std::fs::read_dir(&registry)? {
            let entry = entry?;
            let name = entry.file_name().to_string_lossy().into_owned();
            let ours = name.starts_with("corral-")
                && name.ends_with(&suffix)
                && !name.starts_with("corral-cli");
            if ours && entry.file_type()?.is_dir() {
                std::fs::remove_dir_all(entry.path())
                    .with_context(|| format!("removing {}", entry.path().display()))?;
            }
        }
    }
    Ok(())
}

pub fn run(root: &Path) -> Result<()> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    step(root, "format", &cargo, &["fmt", "--all", "--check"])?;
    crate::layers::run(root)?;
    crate::schemas::run(root, true)?;
    crate::fixtures::run(root, true)?;
    // The attack scripts are sources (tests/adversarial, and the workers of crate tests): they
    // must compile and pass shellcheck, as any script a person edits.
    step(
        root,
        "attack scripts: python3 -m py_compile",
        "sh",
        &[
            "-c",
            "PYTHONPYCACHEPREFIX=target/pycache python3 -m py_compile tests/adversarial/attacks/*.py tests/adversarial/lab/*.py crates/corral-cli/tests/*.py",
        ],
    )?;
    step(
        root,
        "attack scripts: shellcheck",
        "sh",
        &[
            "-c",
            "shellcheck -x -P tests/adversarial/attacks -S warning tests/adversarial/attacks/*.sh tests/adversarial/repos/*.sh tests/guest/*.sh",
        ],
    )?;
    // Dependencies: only crates.io, only the licenses deny.toml allows, no banned crate, no
    // wildcard version. The advisories check needs the RustSec database from the network and
    // is left to `cargo deny check advisories` by hand (README).
    step(
        root,
        "cargo deny: bans, licenses, sources",
        &cargo,
        &["deny", "check", "bans", "licenses", "sources"],
    )?;
    step(
        root,
        "clippy",
        &cargo,
        &[
            "clippy",
            "--workspace",
            "--all-targets",
            "--",
            "-D",
            "warnings",
        ],
    )?;
    // The workspace build turns corral-contract's `schema` feature on (the CLI and xtask use
    // it); an embedder's build does not: lint that one too.
    step(
        root,
        "clippy, corral-contract without its schema feature",
        &cargo,
        &[
            "clippy",
            "-p",
            "corral-contract",
            "--lib",
            "--",
            "-D",
            "warnings",
        ],
    )?;
    step(
        root,
        "tests",
        &cargo,
        &["test", "--workspace", "--no-fail-fast"],
    )?;
    // Embedders take the library crates one by one: each must package and build alone from
    // what it ships (versioned internal dependencies, no file read from the workspace).
    forget_packaged_sources()?;
    step(
        root,
        "library crates package and build alone",
        &cargo,
        &[
            "package",
            "--workspace",
            "--exclude",
            "xtask",
            "--exclude",
            "corral-cli",
            "--offline",
            "--allow-dirty",
        ],
    )?;
    step(
        root,
        "example documents against the schemas",
        "python3",
        &["tests/validate_examples.py"],
    )?;
    step(
        root,
        "schemas in ajv strict mode",
        "node",
        &["tests/ajv_strict.cjs"],
    )?;
    step(root, "fuzz targets", "bash", &["fuzz/smoke.sh"])?;
    // The whole host qualification suite, black-box through the `corral` binary: no change
    // can land that reopens an escape.
    println!("==> host qualification suite: cargo xtask adversarial");
    crate::adversarial::run(root, &[])?;
    // The same suite without a checkout, as a user qualifies a host with only an installed
    // corral: this very binary outside cargo (no CARGO_MANIFEST_DIR), from another folder.
    println!(
        "==> qualification without a checkout: xtask adversarial --corral BIN (outside cargo)"
    );
    let me = std::env::current_exe().context("the xtask binary")?;
    let scratch = std::env::temp_dir().join(format!("corral-ci-standalone-{}", std::process::id()));
    std::fs::create_dir_all(&scratch)?;
    for args in [
        vec!["adversarial", "--list"],
        vec!["adversarial", "--filter", "FS-01,TRUST-01"],
    ] {
        let mut c = Command::new(&me);
        c.args(&args)
            .args([
                "--corral",
                &root.join("target/debug/corral").to_string_lossy(),
            ])
            .env_remove("CARGO_MANIFEST_DIR")
            .current_dir(&scratch);
        println!("    {}", args.join(" "));
        let status = c.status().context("starting xtask outside cargo")?;
        if !status.success() {
            bail!("xtask {} outside cargo failed ({status})", args.join(" "));
        }
    }
    if !scratch.join("corral-qualification/report.json").exists() {
        bail!("the standalone suite wrote no report into its working folder");
    }
    let _ = std::fs::remove_dir_all(&scratch);
    // Hosts users have, in QEMU guests with Debian's own kernels, pure cgroup v2 (README's
    // "Supported hosts"): every step must exit 0.
    let corral = root.join("target/debug/corral");
    let corral = corral.to_string_lossy().into_owned();
    let xtask = me.to_string_lossy().into_owned();
    let guests = |what: &str, args: &[&str]| -> Result<()> {
        let t = Instant::now();
        println!("==> Debian guests: {what}");
        let args: Vec<String> = args.iter().map(|a| (*a).to_owned()).collect();
        let r = crate::vm::run(root, &args);
        println!("    ({:.0} s)", t.elapsed().as_secs_f64());
        r
    };
    // The whole qualification suite in Debian 12's 6.1 guest, pure cgroup v2, under systemd
    // with the harness as a `Delegate=yes` service's main process, so every corral beside it
    // gets a delegated scope of its own; the harness's generic checks also find any corral
    // cgroup or scope left behind. It is the longest guest step (36 min for the debug binary
    // beside CI's other guests: under TCG process start-up and page faults are emulated) and a
    // guest runs on one host thread (`-accel tcg,thread=single`), so it runs in the background
    // beside the other guest steps on the other core, its console (a line per case) in a log
    // printed when it ends. Every bound a case sets on how soon corral returns, and
    // RES-CPU-01's allowance past the CPU budget, is measured where the case runs (a trivial
    // run first, ADR-0060): the guest beside busy CI is slower than any fixed bound assumed.
    // The kernels are fetched first, so no two guests download one package.
    crate::vm::fetch(root, &["6.1", "6.12", "7.x", "ubuntu-24.04"])?;
    let ubuntu_apparmor = crate::vm::ubuntu_apparmor(root)?;
    let suite_61 = vm_args(&[
        "--kernel",
        "6.1",
        "--layout",
        "systemd-service",
        "--tmp",
        "ext4",
        "--timeout",
        "3600",
        "--verbose",
        "--",
        &format!("{xtask} adversarial --corral {corral}"),
    ]);
    // The qualification suite in rootless mode (tests/guest/rootless-suite.sh, ADR-0080):
    // every corral run by an ordinary user with a subordinate range, under its systemd
    // manager, the harness root. The categories the mode changes most: what the sandbox
    // shows of the host and the user's own files (FS), credentials and ids (CRED, with
    // CRED-08 starting corral in the lab's network and mount namespaces, which found the
    // helper's path lost with a namespace corral left), processes (PROC). ~7 min. The whole
    // suite in rootless mode is recorded by hand (ADR-0080): beside CI's other guests it does
    // not fit CI's time.
    let rootless_suite = vm_args(&[
        "--kernel",
        "6.12",
        "--layout",
        "systemd-service",
        "--tmp",
        "ext4",
        "--timeout",
        "1500",
        "--verbose",
        "--",
        &format!(
            "bash {} {xtask} {corral} --filter FS,CRED,PROC",
            root.join("tests/guest/rootless-suite.sh").display()
        ),
    ]);
    // corral alone in a `Delegate=yes` cgroup (the busybox `service` layout: the test binary is
    // the cgroup's only process), probing beside its own threads that keep exiting: the
    // in-place path, where corral must leave the cgroup whose controllers it enables and waits
    // for the threads that were exiting as it moved (ADR-0011, 2026-12-04; without the wait
    // it was refused in 3 of 6 runs here on 6.12 and 7.x, 2 of 3 on 6.1).
    let alone = vm_args(&[
        "--kernel",
        "6.1,6.12,7.x",
        "--layout",
        "service",
        "--tmp",
        "ext4",
        "--timeout",
        "600",
        "--",
        &crate::vm::test_binary(root, "corral-linux", "embedder_threads")?,
    ]);
    // The three run one after another beside the foreground's guests: the 6.1 suite's 36 min
    // are shorter than the foreground's guests, and the core it leaves idle then takes the
    // other two (about 10 min of the foreground until 2026-12-07, when CI ran out of its 90
    // minutes).
    let suite = Background::start(
        root,
        "the whole qualification suite on kernel 6.1 under systemd, then the rootless suite \
         (FS, CRED, PROC) and corral alone beside exiting threads (background)",
        &me,
        vec![
            (
                "the whole qualification suite on kernel 6.1 under systemd".to_owned(),
                suite_61,
            ),
            (
                "the qualification suite in rootless mode (FS, CRED, PROC): kernel 6.12".to_owned(),
                rootless_suite,
            ),
            (
                "corral alone in a Delegate=yes cgroup beside threads that keep exiting: \
                 kernels 6.1, 6.12 and 7.x"
                    .to_owned(),
                alone,
            ),
        ],
    )?;
    // `corral probe` (all nine capabilities, exit 0) and `corral demo` (a captured patch) in
    // every layout corral supports: the root cgroup (a container's), a `Delegate=yes` service
    // (made by the init, and under the host's own systemd as the guests' init), and beside
    // another process under systemd (a login session's situation: corral gets a delegated
    // scope of its own over D-Bus); the cache on ext4 (Debian's default) and, for 6.12, on
    // tmpfs.
    // One command per guest where the layout makes it the unit's only process (the busybox
    // `service` layout: a shell beside corral would share its cgroup, which corral refuses
    // without a systemd to ask); the root cgroup and systemd's layouts take both in one.
    let probe = format!("{corral} probe");
    let demo = format!("{corral} demo");
    let probe_demo = format!("sh -c '{corral} probe && {corral} demo'");
    for (what, kernels, layouts, tmp, cmd) in [
        (
            "corral probe and demo: kernels 6.12 and 7.x, root cgroup and under systemd",
            "6.12,7.x",
            "root,systemd-service,systemd-session",
            "ext4",
            &probe_demo,
        ),
        (
            "corral probe: kernels 6.1, 6.12 and 7.x, Delegate=yes service",
            "6.1,6.12,7.x",
            "service",
            "ext4",
            &probe,
        ),
        (
            "corral demo: kernels 6.1, 6.12 and 7.x, Delegate=yes service",
            "6.1,6.12,7.x",
            "service",
            "ext4",
            &demo,
        ),
        (
            "corral probe and demo: kernel 6.1, root cgroup, beside another process under systemd",
            "6.1",
            "root,systemd-session",
            "ext4",
            &probe_demo,
        ),
        (
            "corral probe and demo: kernel 6.12, cache on tmpfs",
            "6.12",
            "root",
            "tmpfs",
            &probe_demo,
        ),
    ] {
        guests(
            what,
            &[
                "--kernel", kernels, "--layout", layouts, "--tmp", tmp, "--", cmd,
            ],
        )?;
    }
    // Without systemd, a cgroup corral shares (a session scope with the user's shell) or one
    // without the controllers (none, or `cpu` alone missing) is refused (exit 3) in one line
    // that says why and how to fix it, and no cgroup of corral's is left.
    for (layout, says) in [
        (
            "session",
            "grep \"also holds processes that are not corral.s\" /root/probe.txt | grep -q \
             \"systemd is not this host.s init\"",
        ),
        (
            "undelegated",
            "grep -q \"not delegated to corral.s cgroup\" /root/probe.txt",
        ),
        (
            "partial",
            "grep -q \"controller(s) cpu not delegated to corral.s cgroup\" /root/probe.txt",
        ),
    ] {
        let refused = format!(
            "sh -c '{corral} probe > /root/probe.txt; test $? -eq 3 && {says} && \
             test -z \"$(find /sys/fs/cgroup -name \"corral-*\")\"'"
        );
        guests(
            &format!("{layout} layout without systemd: refused in one line, nothing left"),
            &[
                "--kernel", "6.12,7.x", "--layout", layout, "--tmp", "ext4", "--", &refused,
            ],
        )?;
    }
    // corral's run ended from outside as a systemd host ends it (tests/guest/unit-kill.sh,
    // issue 17): its whole unit killed with SIGKILL, and corral alone OOM-killed in a unit
    // with a memory limit while its worker fills it; nothing of the run is left, and corral's
    // groups stay inside the unit it was given.
    let unit_kill = format!(
        "bash {} {corral}",
        root.join("tests/guest/unit-kill.sh").display()
    );
    guests(
        "corral's unit killed whole, and corral OOM-killed in its unit, under systemd: \
         kernels 6.1 and 6.12",
        &[
            "--kernel",
            "6.1,6.12",
            "--layout",
            "systemd-service",
            "--tmp",
            "ext4",
            "--timeout",
            "900",
            "--",
            &unit_kill,
        ],
    )?;
    // Rootless mode (tests/guest/user-manager.sh, issue 13, ADR-0080): an ordinary user under
    // systemd's user manager, from a cgroup it does not own and from a scope it shares: corral
    // gets a delegated scope from the user's manager, attests all nine capabilities, captures
    // a run whose manifest says rootless, and contains attacks on the user's own files (each
    // with its control outside); without the manager it is refused in one line naming the
    // fix, and nothing is left. ~65 s a guest.
    let user_manager = format!(
        "bash {} {corral}",
        root.join("tests/guest/user-manager.sh").display()
    );
    guests(
        "rootless mode under systemd's user manager: kernels 6.1, 6.12 and 7.x",
        &[
            "--kernel",
            "6.1,6.12,7.x",
            "--layout",
            "systemd-service",
            "--tmp",
            "ext4",
            "--",
            &user_manager,
        ],
    )?;
    // Rootless mode where AppArmor restricts user namespaces (tests/guest/apparmor.sh): Ubuntu
    // 24.04's own kernel with Ubuntu's restriction on and AppArmor 4's parser; refused in one
    // line naming the sysctl and `corral setup apparmor`, then after root's setup nine of
    // nine and a captured demo as the user, the same bytes at another path still refused, and
    // the refusal back once the profile is removed. ~70 s.
    let apparmor = format!(
        "bash {} {corral} {}",
        root.join("tests/guest/apparmor.sh").display(),
        ubuntu_apparmor.display()
    );
    guests(
        "rootless mode under AppArmor's user namespace restriction: `corral setup apparmor`, \
         Ubuntu 24.04's kernel",
        &[
            "--kernel",
            "ubuntu-24.04",
            "--layout",
            "systemd-service",
            "--tmp",
            "ext4",
            "--",
            &apparmor,
        ],
    )?;
    // The integration tests that start real sandboxes (corral-cli's, corral-checkout's and
    // corral-linux's test binaries, built on the host) inside guests: in the root cgroup (a
    // container's), in a Delegate=yes service under systemd, and beside a login session's
    // shell under systemd. Not the busybox `service` layout: there the test binary is the
    // service's process and every corral it starts shares its cgroup without a systemd to
    // ask, which corral refuses by design.
    let tests = "corral-cli,corral-checkout,corral-linux";
    // Beside the session's shell the test binary shares its cgroup with a `sleep 100000` and
    // every corral it starts asks systemd for a scope; that layout found a test that took the
    // shell's `sleep 100000` for the sandbox's `sleep 1000`. Each guest costs 7-10 min, so each
    // layout runs once, the two kernels shared between them (until 2026-12-07 every layout ran
    // on both, 50 min of CI's 76): what differs by kernel is attested in every layout by the
    // probe and demo guests above and the whole suite on 6.1, and the time pays for the
    // rootless suite below.
    // The real agents (corral-cli's real_agents.rs: mini-swe-agent, codex, gemini-cli, aider
    // and goose through the credential broker) run on the host as root, above, and codex in the
    // rootless guest below: in root mode a guest adds only the kernel, which the broker test
    // (broker.rs, a Python worker through the same broker) covers in each of these guests,
    // while an emulated Node or Python agent's start costs minutes per run. The guest's log
    // says so.
    for (kernels, layouts) in [("6.12", "root,systemd-session"), ("7.x", "systemd-service")] {
        guests(
            &format!("integration tests on kernel {kernels}: {layouts}"),
            &[
                "--kernel",
                kernels,
                "--layout",
                layouts,
                "--tmp",
                "ext4",
                "--timeout",
                "1800",
                "--tests",
                tests,
                "--host-only",
                "real_agents",
            ],
        )?;
    }
    // The same integration tests run by an ordinary user with a subordinate range under its
    // systemd manager (tests/guest/as-user.sh): every corral they start, and the test
    // binaries that drive the backend in process (an ELF constructor calls `choose_mode`
    // before libtest's threads), are in rootless mode. A test whose premise needs root checks
    // its rootless counterpart or says "NOT APPLICABLE in rootless mode" on the log. Of the
    // real agents, codex (a native binary) runs here; the others run on the host only: under
    // emulation each Python or Node agent costs 2-6 min (aider's start alone is minutes, and
    // it waits out a refused call for a minute), 11 of the guest's 16 min on 2026-12-07, which
    // CI's 90 minutes do not have; the rootless sandbox they would meet is the one codex and
    // the broker test meet here and the suite's Python attacks meet below. ~9 min.
    guests(
        "integration tests in rootless mode: kernel 6.12, an ordinary user under systemd's \
         user manager",
        &[
            "--kernel",
            "6.12",
            "--layout",
            "systemd-service",
            "--tmp",
            "ext4",
            "--timeout",
            "1800",
            "--as-user",
            "--tests",
            tests,
            "--skip",
            "mini_swe_agent_,gemini_cli_,aider_,goose_",
        ],
    )?;
    suite.finish()?;
    println!("ci: all steps passed");
    Ok(())
}

/// `xtask vm ARGS...` as an argument vector.
fn vm_args(args: &[&str]) -> Vec<String> {
    std::iter::once("vm")
        .chain(args.iter().copied())
        .map(str::to_owned)
        .collect()
}

/// Steps that run beside the others, one after another (each `xtask vm` as a child, their
/// output in one log under `target/vm/`): a thread starts each and polls it, so that one
/// which ends leaves the core to the next at once. Stopped if CI ends before it is waited
/// for: the thread kills its current child by its own pid (it owns the child, so the pid
/// cannot be another process's) and starts no more; its qemu ends with it (`setpriv
/// --pdeathsig`).
struct Background {
    name: String,
    thread: Option<std::thread::JoinHandle<Result<()>>>,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    log: std::path::PathBuf,
    started: Instant,
}

impl Background {
    fn start(
        root: &Path,
        name: &str,
        xtask: &Path,
        steps: Vec<(String, Vec<String>)>,
    ) -> Result<Self> {
        use std::io::Write as _;
        use std::sync::atomic::Ordering;
        static STARTED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let log = root.join(format!(
            "target/vm/ci-background-{}-{}.log",
            std::process::id(),
            STARTED.fetch_add(1, Ordering::SeqCst)
        ));
        std::fs::create_dir_all(root.join("target/vm"))?;
        let mut out = std::fs::File::create(&log).with_context(|| format!("{}", log.display()))?;
        println!(
            "==> started in the background: {name} (log {})",
            log.display()
        );
        for (what, _) in &steps {
            println!("    then: {what}");
        }
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (root, xtask, stopped) = (root.to_owned(), xtask.to_owned(), stop.clone());
        let thread = std::thread::spawn(move || -> Result<()> {
            for (what, args) in steps {
                let t = Instant::now();
                writeln!(out, "==> {what}")?;
                let mut child = Command::new(&xtask)
                    .args(&args)
                    // As `cargo xtask` runs it (the workspace is found from it).
                    .env("CARGO_MANIFEST_DIR", root.join("xtask"))
                    .current_dir(&root)
                    .stdin(std::process::Stdio::null())
                    .stdout(out.try_clone()?)
                    .stderr(out.try_clone()?)
                    .spawn()
                    .with_context(|| format!("starting {}", xtask.display()))?;
                let status = loop {
                    if stopped.load(Ordering::SeqCst) {
                        let _ = child.kill();
                        let _ = child.wait();
                        bail!("{what}: stopped (CI failed before it ended)");
                    }
                    if let Some(status) = child.try_wait()? {
                        break status;
                    }
                    std::thread::sleep(std::time::Duration::from_secs(1));
                };
                writeln!(out, "    ({:.0} s, {status})", t.elapsed().as_secs_f64())?;
                if !status.success() {
                    bail!("{what} failed ({status})");
                }
            }
            Ok(())
        });
        Ok(Self {
            name: name.to_owned(),
            thread: Some(thread),
            stop,
            log,
            started: Instant::now(),
        })
    }

    /// Waits for every step (or the first that fails).
    fn wait(&mut self) -> Result<()> {
        self.thread
            .take()
            .context("waited for twice")?
            .join()
            .map_err(|_| anyhow::anyhow!("the background thread panicked"))?
    }

    /// Waits for every step, then prints the log.
    fn finish(mut self) -> Result<()> {
        println!("==> waiting for: {}", self.name);
        let r = self.wait();
        println!(
            "==> {} ({}, {:.0} s):",
            self.name,
            if r.is_ok() { "passed" } else { "failed" },
            self.started.elapsed().as_secs_f64()
        );
        println!("{}", String::from_utf8_lossy(&self.take_log()));
        r
    }

    fn take_log(&self) -> Vec<u8> {
        let text = std::fs::read(&self.log).unwrap_or_default();
        let _ = std::fs::remove_file(&self.log);
        text
    }
}

impl Drop for Background {
    fn drop(&mut self) {
        if let Some(t) = self.thread.take() {
            self.stop.store(true, std::sync::atomic::Ordering::SeqCst);
            let _ = t.join();
            println!(
                "==> stopped: {} (CI failed before it ended); its log so far:\n{}",
                self.name,
                String::from_utf8_lossy(&self.take_log())
            );
        } else {
            let _ = std::fs::remove_file(&self.log);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn steps(list: &[(&str, &str)]) -> Vec<(String, Vec<String>)> {
        list.iter()
            .map(|(what, script)| {
                (
                    (*what).to_owned(),
                    vec!["-c".to_owned(), (*script).to_owned()],
                )
            })
            .collect()
    }

    fn root() -> std::path::PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
    }

    #[test]
    fn background_steps_run_in_order_and_stop_at_the_first_failure() {
        let mut bg = Background::start(
            &root(),
            "test",
            Path::new("/bin/sh"),
            steps(&[
                ("one", "echo first"),
                ("two", "echo second; exit 3"),
                ("three", "echo third"),
            ]),
        )
        .unwrap();
        let err = bg.wait().unwrap_err().to_string();
        let seen = std::fs::read_to_string(&bg.log).unwrap();
        let log = bg.log.clone();
        drop(bg);
        assert!(err.contains("two failed"), "{err}");
        assert!(seen.contains("==> one\nfirst\n"), "{seen}");
        assert!(seen.contains("==> two\nsecond\n"), "{seen}");
        assert!(!seen.contains("third"), "{seen}");
        assert!(!log.exists(), "the log is removed");
        // Control: the same steps without the failure all run and pass.
        let bg = Background::start(
            &root(),
            "test",
            Path::new("/bin/sh"),
            steps(&[("one", "echo first"), ("three", "echo third")]),
        )
        .unwrap();
        bg.finish().unwrap();
    }

    #[test]
    fn a_dropped_background_kills_its_step_and_starts_no_more() {
        let bg = Background::start(
            &root(),
            "test",
            Path::new("/bin/sh"),
            steps(&[("long", "echo $$; exec sleep 1000"), ("next", "echo next")]),
        )
        .unwrap();
        let log = bg.log.clone();
        let pid = loop {
            let text = std::fs::read_to_string(&log).unwrap_or_default();
            if let Some(line) = text.lines().nth(1) {
                break line.trim().parse::<i32>().unwrap();
            }
            std::thread::yield_now();
        };
        drop(bg);
        // The step's process is gone (killed and reaped by the thread, so no zombie either).
        assert!(!Path::new(&format!("/proc/{pid}")).exists());
        assert!(!log.exists());
    }
}
