//! `cargo xtask vm`: throw-away QEMU guests with Debian's own kernels, in the cgroup layouts
//! systemd hosts have, running one command each (issue 12).
//!
//! No disk image is built. The guest's root is the host's `/`, shared read-only over
//! virtio-9p (`multidevs=remap`), under a tmpfs overlay; a small busybox init in an initramfs
//! of our own loads the kernel's modules, builds the root, mounts a pure cgroup v2 hierarchy,
//! lays it out (below), runs the command and powers off. `-nodefaults -nic none`: the guest
//! has no network device. Everything lives under `target/vm/`; the host's apt sources,
//! cgroups and mounts are never touched.
//!
//! Measured on this machine kind (issue 12): `/dev/kvm` is a software nested hypervisor on
//! which distribution kernels hang in the decompressor, so the guests run under TCG
//! (`-accel tcg,thread=single`: two vCPUs on one host thread. Multi-threaded TCG crashed 7.x
//! guests under a busy host: kernel panics at boot under systemd and once an Oops on an
//! `int3` in `tg_cpus` while a jump label was patched, which is cross-modifying code between
//! vCPUs that MTTCG does not keep coherent; one thread keeps it so).
//!
//! The command runs alone in the layout's cgroup (it is `exec`ed by a shell that moved itself
//! there), as a unit's main process does; pass `sh -c '...'` for more than one command.
//!
//! Layouts (`--layout`), made by the init without systemd in the guest:
//! - `root`: corral in the root cgroup (a container's view);
//! - `service`: a `Delegate=yes` service, `/system.slice/corral.service`, with `cpu memory
//!   pids` enabled down to it;
//! - `session`: a login session scope, `/user.slice/user-0.slice/session-1.scope`, holding
//!   corral and a sibling "shell" process, controllers delegated to the scope;
//! - `undelegated`: a service whose parent enables no controllers for it;
//! - `partial`: a service whose parent enables `memory pids` but not `cpu` for it (as an
//!   older systemd's `Delegate=` list or an administrator's `DelegateSubgroup` may leave it);
//! - `systemd-service`, `systemd-session`: the host's own systemd (Debian 12's 252) is the
//!   guest's init and the command its service's main process: a `Delegate=yes` service, or
//!   an ordinary one where the command runs beside another process as in a login session's
//!   scope. Where corral shares its cgroup (a harness beside it, the session's shell) it must
//!   ask systemd over D-Bus for a delegated scope of its own.
//!
//! `/tmp` (`--tmp`): `tmpfs`, or `ext4` on a sparse virtio disk (Debian 12's default). corral's
//! cache and data folders (`XDG_CACHE_HOME`, `XDG_DATA_HOME`) are put there too, since the
//! base checkouts are the workspace's lower layer and their file system decides whether it can
//! be idmapped; the guest's own root (9p under an overlay) is like no host's.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

/// The kernels of the matrix: a name, the Debian suite (`None`: the host's own apt sources)
/// and how to find its package there.
const KERNELS: &[(&str, Option<&str>, &str)] = &[
    // Debian 12's kernel: the package the `linux-image-amd64` metapackage depends on.
    ("6.1", None, "meta:linux-image-amd64"),
    // Debian 12's newer kernel (bookworm's own 6.12 packages).
    (
        "6.12",
        None,
        "search:^linux-image-6\\.12\\.[0-9]+\\+deb12-amd64-unsigned$",
    ),
    // Debian 13's backports kernel (7.x), from an apt configuration of the tool's own under
    // `target/vm/apt/`: the host's sources are never changed.
    ("7.x", Some("trixie-backports"), "meta:linux-image-amd64"),
    // Debian 11's kernel: below what corral supports (6.1); the probe must say what is
    // missing and since which version. Only when named (`--kernel 5.10` or `all`).
    ("5.10", Some("bullseye"), "meta:linux-image-amd64"),
    // Ubuntu 24.04's release kernel (6.8, AppArmor with Ubuntu's user namespace restriction,
    // `kernel.apparmor_restrict_unprivileged_userns`): packages pinned by digest
    // (`UBUNTU_KERNEL`). Only when named; the userland stays the host's Debian.
    ("ubuntu-24.04", None, "pinned:ubuntu-24.04"),
];

/// Ubuntu's archive, and the packages fetched from it by path, each checked against its
/// SHA-256. Debian's keyrings hold no Ubuntu key, so apt could not check Ubuntu's index here:
/// the digests were copied from noble's `main/binary-amd64/Packages` (the release pocket,
/// whose packages the pool keeps) on 2026-12-07 and pin those bytes from then on. They feed a
/// throw-away guest without a network device, nothing else.
const UBUNTU_ARCHIVE: &str = "http://archive.ubuntu.com/ubuntu/";
const UBUNTU_KERNEL: &[(&str, &str)] = &[
    (
        "pool/main/l/linux-signed/linux-image-6.8.0-31-generic_6.8.0-31.31_amd64.deb",
        "fd2ed023c84163e62c73d3b7b613a9b004bd31e335641c23d42bd249e489fbe6",
    ),
    (
        "pool/main/l/linux/linux-modules-6.8.0-31-generic_6.8.0-31.31_amd64.deb",
        "3f17f2c279257eb50e40da44390bdf8272c440ca078831c348773d1314b5c2fe",
    ),
];
/// AppArmor 4's parser (it knows `userns`, which Debian 12's 3.0 does not) and the C library
/// it needs (2.38 or later; the host's is Debian 12's 2.36): unpacked side by side, the parser
/// run through that library's own loader (`ubuntu_apparmor`).
const UBUNTU_APPARMOR: &[(&str, &str)] = &[
    (
        "pool/main/a/apparmor/apparmor_4.0.0-beta3-0ubuntu3_amd64.deb",
        "d783c4183840745b931b72a9df8c15d341f640efa6f3069e5935c1b6542ff840",
    ),
    (
        "pool/main/g/glibc/libc6_2.39-0ubuntu8_amd64.deb",
        "af36c7ac770770fe3d3c10e85d6bc538e76e57570ba7db7d397fb9f654783ef3",
    ),
];

/// Downloads `packages` from Ubuntu's archive into `debs` (once), checks each digest and
/// unpacks them all into `dir`.
fn fetch_pinned(debs: &Path, dir: &Path, packages: &[(&str, &str)]) -> Result<()> {
    use sha2::Digest as _;
    std::fs::create_dir_all(debs)?;
    std::fs::create_dir_all(dir)?;
    for (path, want) in packages {
        let name = path.rsplit('/').next().context("package path")?;
        let deb = debs.join(name);
        if !deb.exists() {
            let part = debs.join(format!("{name}.part"));
            run_ok(
                Command::new("curl")
                    .args(["-fsS", "--retry", "3", "-o"])
                    .arg(&part)
                    .arg(format!("{UBUNTU_ARCHIVE}{path}")),
            )
            .with_context(|| format!("downloading {UBUNTU_ARCHIVE}{path}"))?;
            std::fs::rename(&part, &deb)?;
        }
        let got = format!("{:x}", sha2::Sha256::digest(std::fs::read(&deb)?));
        if got != *want {
            let _ = std::fs::remove_file(&deb);
            bail!("{name}: SHA-256 {got}, pinned {want}: removed, not used");
        }
        run_ok(Command::new("dpkg-deb").arg("-x").arg(&deb).arg(dir))?;
    }
    Ok(())
}

/// Ubuntu 24.04's AppArmor parser, unpacked under `target/vm/ubuntu-apparmor/` with its C
/// library; returns that folder. Run it as
/// `DIR/usr/lib64/ld-linux-x86-64.so.2 --library-path DIR/lib/x86_64-linux-gnu DIR/sbin/apparmor_parser`
/// (tests/guest/apparmor.sh installs such a wrapper as the guest's `apparmor_parser`).
pub fn ubuntu_apparmor(root: &Path) -> Result<PathBuf> {
    let vm = root.join("target/vm");
    let dir = vm.join("ubuntu-apparmor");
    if !dir.join(".unpacked").exists() {
        let _ = std::fs::remove_dir_all(&dir);
        fetch_pinned(&vm.join("debs"), &dir, UBUNTU_APPARMOR)?;
        std::fs::write(dir.join(".unpacked"), "")?;
    }
    Ok(dir)
}

/// The kernels `cargo xtask vm` boots when `--kernel` is not given: the supported ones.
const SUPPORTED: &[&str] = &["6.1", "6.12", "7.x"];

/// Modules a kernel may build in or not have at all (7.x has no `crc32c_generic`).
const OPTIONAL_MODULES: &[&str] = &["crc32c_generic"];

const LAYOUTS: &[&str] = &[
    "root",
    "service",
    "session",
    "undelegated",
    "partial",
    "systemd-service",
    "systemd-session",
];
const TMPS: &[&str] = &["tmpfs", "ext4"];

/// Modules the init loads (with their dependencies from `modules.dep`), unless built in.
const MODULES: &[&str] = &[
    "virtio_pci",
    "virtio_blk",
    "9pnet_virtio",
    "9p",
    "overlay",
    // ext4 asks the crypto API for crc32c at mount time (ENOENT without it; no modprobe here).
    "crc32c_generic",
    "ext4",
];

struct Opts {
    kernels: Vec<String>,
    layouts: Vec<String>,
    tmps: Vec<String>,
    cmd: String,
    timeout: Duration,
    verbose: bool,
}

fn parse(root: &Path, args: &[String]) -> Result<Opts> {
    let list = |v: &str, all: &[&str], what: &str| -> Result<Vec<String>> {
        if v == "all" {
            return Ok(all.iter().map(|s| (*s).to_owned()).collect());
        }
        let out: Vec<String> = v.split(',').map(str::to_owned).collect();
        for x in &out {
            if !all.contains(&x.as_str()) {
                bail!("--{what} {x:?}: not one of {} (or all)", all.join(", "));
            }
        }
        Ok(out)
    };
    let kernel_names: Vec<&str> = KERNELS.iter().map(|k| k.0).collect();
    let mut o = Opts {
        kernels: SUPPORTED.iter().map(|k| (*k).to_owned()).collect(),
        layouts: vec!["service".into()],
        tmps: vec!["tmpfs".into()],
        cmd: String::new(),
        timeout: Duration::from_secs(600),
        verbose: false,
    };
    let mut corral: Option<PathBuf> = None;
    let mut as_user = false;
    let mut tests: Option<String> = None;
    let mut host_only: Vec<String> = Vec::new();
    let mut skip: Vec<String> = Vec::new();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut val = || {
            it.next()
                .cloned()
                .with_context(|| format!("{a} needs a value"))
        };
        match a.as_str() {
            "--kernel" => o.kernels = list(&val()?, &kernel_names, "kernel")?,
            "--layout" => o.layouts = list(&val()?, LAYOUTS, "layout")?,
            "--tmp" => o.tmps = list(&val()?, TMPS, "tmp")?,
            "--timeout" => {
                o.timeout = Duration::from_secs(val()?.parse().context("--timeout seconds")?);
            }
            "--verbose" => o.verbose = true,
            "--as-user" => as_user = true,
            "--corral" => corral = Some(PathBuf::from(val()?)),
            "--tests" => tests = Some(val()?),
            "--host-only" => {
                host_only = val()?.split(',').map(str::to_owned).collect();
            }
            "--skip" => skip = val()?.split(',').map(str::to_owned).collect(),
            "--" => {
                o.cmd = it.cloned().collect::<Vec<_>>().join(" ");
                break;
            }
            other => bail!(
                "unknown argument {other:?}; usage: cargo xtask vm [--kernel 6.1,6.12,7.x,5.10|all] \
                 [--layout root,service,session,undelegated,partial,systemd-service,systemd-session|all] [--tmp tmpfs,ext4|all] \
                 [--timeout S] [--corral BIN] [--tests PKG,...] [--host-only TEST,...] [--skip FILTER,...] [--as-user] [--verbose] [-- COMMAND]"
            ),
        }
    }
    if let Some(packages) = tests {
        o.cmd = tests_command(root, &packages, &host_only, &skip)?;
    } else if !host_only.is_empty() || !skip.is_empty() {
        bail!("--host-only and --skip name tests of --tests");
    }
    if o.cmd.is_empty() {
        // `corral probe`: the release binary when there is one, else the debug one.
        let bin = corral.unwrap_or_else(|| {
            let release = root.join("target/release/corral");
            if release.exists() {
                release
            } else {
                root.join("target/debug/corral")
            }
        });
        let bin = std::fs::canonicalize(&bin)
            .with_context(|| format!("{}: build corral first", bin.display()))?;
        o.cmd = format!("{} probe", bin.display());
    }
    if as_user {
        // An ordinary user under its systemd manager (tests/guest/as-user.sh): rootless mode.
        if o.layouts.iter().any(|l| !l.starts_with("systemd-")) {
            bail!(
                "--as-user needs a layout whose init is systemd (systemd-service, systemd-session)"
            );
        }
        o.cmd = format!(
            "bash {} {}",
            root.join("tests/guest/as-user.sh").display(),
            o.cmd
        );
    }
    Ok(o)
}

/// `--tests PKG,...`: builds the packages' test binaries on the host (`cargo test --no-run`)
/// and returns a guest command that runs each from its package's folder, as `cargo test`
/// would, and exits non-zero when any failed. `host_only` names binaries the guest does not
/// run; `skip` filters passed to every binary as libtest's `--skip` (tests whose names
/// contain one are not run in the guest). Both are said on the guest's log.
fn tests_command(
    root: &Path,
    packages: &str,
    host_only: &[String],
    skip: &[String],
) -> Result<String> {
    let mut args = Vec::new();
    for p in packages.split(',').filter(|p| !p.is_empty()) {
        args.extend(["-p", p]);
    }
    let built = built_tests(root, &args)?;
    // Each binary's output is also kept, so that a failure's panic is printed again at the
    // end: the console's last lines, which CI shows, are otherwise the later binaries' output.
    let mut script = String::from("fail=0\nlogs=$(mktemp -d)\nn=0\n");
    for name in host_only {
        if !built.iter().any(|b| b.name == *name) {
            bail!("--host-only {name}: no such test binary in {packages}");
        }
        // Said where the log shows it: the binary runs in the host's test command only.
        script.push_str(&format!(
            "echo 'corral-vm: host only, not run in this guest: {name} (the test command runs it on the host)'\n"
        ));
    }
    let mut skips = String::new();
    for filter in skip {
        // A filter is a test name's part: letters, digits and `_` (said as is in the script).
        if filter.is_empty()
            || !filter
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_')
        {
            bail!("--skip {filter:?}: a filter is part of a test's name ([A-Za-z0-9_]+)");
        }
        script.push_str(&format!(
            "echo 'corral-vm: tests whose names contain {filter} are not run in this guest \
             (the test command runs them on the host)'\n"
        ));
        skips.push_str(&format!(" --skip {filter}"));
    }
    for BuiltTest { exe, dir, name } in &built {
        if host_only.contains(name) {
            continue;
        }
        script.push_str(&format!(
            "n=$((n+1)); echo \"corral-vm: test {exe}\"; \
             {{ cd '{dir}' && CARGO_MANIFEST_DIR='{dir}' '{exe}'{skips} 2>&1; echo $? > \"$logs/$n.rc\"; }} \
             | tee \"$logs/$n.log\"; \
             [ \"$(cat \"$logs/$n.rc\")\" = 0 ] || {{ fail=1; echo '{exe}' > \"$logs/$n.failed\"; \
             echo \"corral-vm: test failed: {exe}\"; }}\n"
        ));
    }
    script.push_str(
        "for f in \"$logs\"/*.failed; do [ -e \"$f\" ] || continue; \
         echo \"corral-vm: failed in $(cat \"$f\"):\"; \
         grep -a -A12 'panicked at' \"${f%.failed}.log\" | head -80; done\n\
         rm -rf \"$logs\"\nexit $fail\n",
    );
    let path = root
        .join("target/vm")
        .join(format!("tests-{}.sh", std::process::id()));
    std::fs::create_dir_all(path.parent().context("target/vm")?)?;
    std::fs::write(&path, script)?;
    Ok(format!("sh {}", path.display()))
}

/// The path of one integration test binary (`cargo test --no-run -p PACKAGE --test TEST`),
/// for a guest that runs it as the layout's only process.
pub fn test_binary(root: &Path, package: &str, test: &str) -> Result<String> {
    built_tests(root, &["-p", package, "--test", test])?
        .into_iter()
        .find(|t| t.name == test)
        .map(|t| t.exe)
        .with_context(|| format!("cargo built no test binary {test} in {package}"))
}

/// One test binary `cargo test --no-run` built: its target's name, its path, and its
/// package's folder (where `cargo test` would run it).
struct BuiltTest {
    name: String,
    exe: String,
    dir: String,
}

/// Builds the test binaries `cargo test --no-run ARGS` selects on the host.
fn built_tests(root: &Path, args: &[&str]) -> Result<Vec<BuiltTest>> {
    let out = run_ok(
        Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
            .args(["test", "--no-run", "--message-format=json"])
            .args(args)
            .current_dir(root),
    )?;
    let mut built = Vec::new();
    for v in out
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
    {
        let (Some(name), Some(exe), Some(manifest)) = (
            v["target"]["name"].as_str(),
            v["executable"].as_str(),
            v["manifest_path"].as_str(),
        ) else {
            continue;
        };
        if v["profile"]["test"] != serde_json::Value::Bool(true) {
            continue;
        }
        let dir = Path::new(manifest)
            .parent()
            .context("a manifest path without a folder")?;
        built.push(BuiltTest {
            name: name.to_owned(),
            exe: exe.to_owned(),
            dir: dir.display().to_string(),
        });
    }
    Ok(built)
}

fn run_ok(cmd: &mut Command) -> Result<String> {
    let out = cmd
        .stderr(Stdio::piped())
        .output()
        .with_context(|| format!("starting {cmd:?}"))?;
    if !out.status.success() {
        bail!(
            "{cmd:?} failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// apt's options for a suite of the tool's own: its sources, lists and downloads under
/// `target/vm/apt/<suite>/`, nothing of the host's apt state read or written. The index is
/// fetched once (`apt-get update` with these options); the host's keyring checks it.
fn apt_options(vm: &Path, suite: Option<&str>) -> Result<Vec<String>> {
    let Some(suite) = suite else {
        return Ok(Vec::new());
    };
    let dir = vm.join("apt").join(suite);
    let opts: Vec<String> = [
        format!(
            "Dir::Etc::SourceList={}",
            dir.join("sources.list").display()
        ),
        "Dir::Etc::SourceParts=/dev/null".to_owned(),
        format!("Dir::State::Lists={}", dir.join("lists").display()),
        "Dir::State::status=/dev/null".to_owned(),
        format!("Dir::Cache::Archives={}", dir.join("archives").display()),
        "Dir::Cache::pkgcache=".to_owned(),
        "Dir::Cache::srcpkgcache=".to_owned(),
        "Acquire::Languages=none".to_owned(),
        "APT::Architecture=amd64".to_owned(),
        "APT::Sandbox::User=root".to_owned(),
    ]
    .into_iter()
    .flat_map(|o| ["-o".to_owned(), o])
    .collect();
    if !dir.join(".updated").exists() {
        for sub in ["lists/partial", "archives/partial"] {
            std::fs::create_dir_all(dir.join(sub))?;
        }
        std::fs::write(
            dir.join("sources.list"),
            format!(
                "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] \
                 http://deb.debian.org/debian {suite} main\n"
            ),
        )?;
        run_ok(Command::new("apt-get").args(&opts).args(["update", "-q"]))
            .with_context(|| format!("fetching the {suite} package index"))?;
        std::fs::write(dir.join(".updated"), suite)?;
    }
    Ok(opts)
}

/// The Debian packages of a kernel entry: the image package, and where the image is split
/// (Debian's 7.x packaging: `linux-image-*` depends on `linux-binary-*` for the kernel,
/// `linux-modules-*` for its modules and `linux-base-<version>` for `modules.builtin`) those
/// parts too.
fn packages_of(apt: &[String], spec: &str) -> Result<Vec<String>> {
    let image = package_of(apt, spec)?;
    let show = run_ok(Command::new("apt-cache").args(apt).args(["show", &image]))?;
    let depends = show
        .lines()
        .find_map(|l| l.strip_prefix("Depends: "))
        .unwrap_or("");
    let mut out = vec![image];
    for d in depends.split([',', '|']) {
        let name = d.split_whitespace().next().unwrap_or("");
        // linux-base-<version> (not linux-base itself) holds modules.builtin and .order.
        let versioned_base =
            name.starts_with("linux-base-") && name[11..].starts_with(|c: char| c.is_ascii_digit());
        if (name.starts_with("linux-binary-")
            || name.starts_with("linux-modules-")
            || versioned_base)
            && !out.iter().any(|p| p == name)
        {
            out.push(name.to_owned());
        }
    }
    Ok(out)
}

/// The Debian package name for a kernel entry.
fn package_of(apt: &[String], spec: &str) -> Result<String> {
    if let Some(meta) = spec.strip_prefix("meta:") {
        let deps = run_ok(Command::new("apt-cache").args(apt).args(["depends", meta]))?;
        return deps
            .lines()
            .filter_map(|l| l.trim().strip_prefix("Depends: "))
            .map(str::trim)
            .find(|d| d.starts_with("linux-image-"))
            .map(str::to_owned)
            .with_context(|| format!("{meta} depends on no linux-image-* package"));
    }
    let re = spec.strip_prefix("search:").context("kernel spec")?;
    let found = run_ok(
        Command::new("apt-cache")
            .args(apt)
            .args(["search", "--names-only", re]),
    )?;
    let mut names: Vec<String> = found
        .lines()
        .filter_map(|l| l.split(" - ").next())
        .map(str::to_owned)
        .collect();
    // Highest version last (dpkg order on the names' version part is enough here).
    names.sort_by_key(|a| version_key(a));
    names
        .pop()
        .with_context(|| format!("no package matches {re}; is bookworm in apt's sources?"))
}

fn version_key(name: &str) -> Vec<u64> {
    name.split(|c: char| !c.is_ascii_digit())
        .filter(|s| !s.is_empty())
        .filter_map(|s| s.parse().ok())
        .collect()
}

/// A kernel unpacked under `target/vm/kernels/<pkg>`: its `vmlinuz` and modules directory.
struct Kernel {
    name: String,
    package: String,
    vmlinuz: PathBuf,
    modules: PathBuf,
}

fn fetch_kernel(vm: &Path, name: &str, suite: Option<&str>, spec: &str) -> Result<Kernel> {
    let pinned = spec.starts_with("pinned:");
    let packages: Vec<String> = if pinned {
        UBUNTU_KERNEL
            .iter()
            .filter_map(|(p, _)| p.rsplit('/').next()?.split('_').next())
            .map(str::to_owned)
            .collect()
    } else {
        packages_of(&apt_options(vm, suite)?, spec)?
    };
    let package = packages[0].clone();
    let dir = vm.join("kernels").join(&package);
    if pinned && !dir.join(".unpacked").exists() {
        let _ = std::fs::remove_dir_all(&dir);
        fetch_pinned(&vm.join("debs"), &dir, UBUNTU_KERNEL)?;
    }
    if !dir.join(".unpacked").exists() {
        let apt = apt_options(vm, suite)?;
        let debs = vm.join("debs");
        std::fs::create_dir_all(&debs)?;
        if !pinned {
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(&dir)?;
        }
        for p in packages.iter().filter(|_| !pinned) {
            // apt-get download needs no change to the host's sources or state.
            run_ok(
                Command::new("apt-get")
                    .args(&apt)
                    .args(["download", "-q", p])
                    .current_dir(&debs),
            )?;
            let deb = std::fs::read_dir(&debs)?
                .filter_map(Result::ok)
                .map(|e| e.path())
                .find(|f| {
                    f.file_name()
                        .and_then(|n| n.to_str())
                        .is_some_and(|n| n.starts_with(&format!("{p}_")) && n.ends_with(".deb"))
                })
                .with_context(|| format!("apt-get download left no {p} .deb"))?;
            run_ok(Command::new("dpkg-deb").arg("-x").arg(&deb).arg(&dir))?;
        }
        // Debian 13's packages put the modules under usr/lib; depmod -b looks in lib.
        if !dir.join("lib").exists() && dir.join("usr/lib/modules").is_dir() {
            std::os::unix::fs::symlink("usr/lib", dir.join("lib"))?;
        }
        // The package's postinst would run depmod: the guests' modprobe needs its index.
        let version = std::fs::read_dir(dir.join("lib/modules"))?
            .filter_map(Result::ok)
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .next()
            .context("no lib/modules in the kernel package")?;
        run_ok(
            Command::new("/usr/sbin/depmod")
                .arg("-b")
                .arg(&dir)
                .arg(&version),
        )
        .context("depmod (apt-get install kmod)")?;
        std::fs::write(dir.join(".unpacked"), packages.join(" "))?;
    }
    let modules = std::fs::read_dir(dir.join("lib/modules"))?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .next()
        .context("no lib/modules in the kernel package")?;
    // boot/vmlinuz-<version> (Debian 12), or lib/modules/<version>/vmlinuz (Debian 13).
    let vmlinuz = std::fs::read_dir(dir.join("boot"))
        .into_iter()
        .flatten()
        .filter_map(Result::ok)
        .map(|e| e.path())
        .find(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("vmlinuz-"))
        })
        .or_else(|| Some(modules.join("vmlinuz")).filter(|p| p.is_file()))
        .context("no vmlinuz in the kernel package")?;
    Ok(Kernel {
        name: name.to_owned(),
        package,
        vmlinuz,
        modules,
    })
}

/// A module's bytes (decompressed when the package ships `.ko.xz`, or Ubuntu's `.ko.zst`).
fn module_bytes(path: &Path) -> Result<Vec<u8>> {
    let tool = match path.extension().and_then(|e| e.to_str()) {
        Some("xz") => "xz",
        Some("zst") => "zstd",
        _ => return Ok(std::fs::read(path)?),
    };
    let d = Command::new(tool)
        .arg("-dc")
        .arg(path)
        .output()
        .with_context(|| format!("{tool} (scripts/setup.sh installs it)"))?;
    if !d.status.success() {
        bail!("{tool} -d {}", path.display());
    }
    Ok(d.stdout)
}

/// The `depends=` list of a module's `.modinfo` (what depmod would put in modules.dep; the
/// package's postinst runs depmod, which is not run here).
fn module_depends(bytes: &[u8]) -> Vec<String> {
    let key = b"\0depends=";
    bytes
        .windows(key.len())
        .position(|w| w == key)
        .map(|at| {
            let rest = &bytes[at + key.len()..];
            let end = rest.iter().position(|&b| b == 0).unwrap_or(rest.len());
            String::from_utf8_lossy(&rest[..end])
                .split(',')
                .filter(|s| !s.is_empty())
                .map(|s| s.replace('-', "_"))
                .collect()
        })
        .unwrap_or_default()
}

/// `MODULES` and their dependencies, dependencies first, as (file name, bytes); built-in
/// ones are left out.
fn module_order(modules: &Path) -> Result<Vec<(String, Vec<u8>)>> {
    fn walk(dir: &Path, out: &mut BTreeMap<String, PathBuf>) -> Result<()> {
        for e in std::fs::read_dir(dir)?.filter_map(Result::ok) {
            let p = e.path();
            if e.file_type()?.is_dir() {
                walk(&p, out)?;
            } else if let Some(n) = p.file_name().and_then(|n| n.to_str()) {
                let stem = n.trim_end_matches(".xz").trim_end_matches(".zst");
                if let Some(name) = stem.strip_suffix(".ko") {
                    out.insert(name.replace('-', "_"), p.clone());
                }
            }
        }
        Ok(())
    }
    let mut by_name = BTreeMap::new();
    walk(&modules.join("kernel"), &mut by_name)?;
    let builtin = std::fs::read_to_string(modules.join("modules.builtin")).unwrap_or_default();
    let is_builtin = |name: &str| {
        builtin.lines().any(|l| {
            l.rsplit('/')
                .next()
                .is_some_and(|b| b.trim_end_matches(".ko").replace('-', "_") == name)
        })
    };
    let mut order = Vec::new();
    let mut seen = BTreeSet::new();
    let mut stack: Vec<(String, bool)> = MODULES
        .iter()
        .rev()
        .map(|m| ((*m).to_owned(), false))
        .collect();
    let mut loaded: BTreeMap<String, Vec<u8>> = BTreeMap::new();
    // Depth-first, dependencies before dependents.
    while let Some((name, expanded)) = stack.pop() {
        if expanded {
            if let Some(bytes) = loaded.remove(&name) {
                order.push((format!("{name}.ko"), bytes));
            }
            continue;
        }
        if !seen.insert(name.clone()) {
            continue;
        }
        match by_name.get(&name) {
            Some(path) => {
                let bytes = module_bytes(path)?;
                let deps = module_depends(&bytes);
                loaded.insert(name.clone(), bytes);
                stack.push((name, true));
                for d in deps.into_iter().rev() {
                    stack.push((d, false));
                }
            }
            None if is_builtin(&name) || OPTIONAL_MODULES.contains(&name.as_str()) => {}
            None => bail!("module {name} is neither a module nor built in"),
        }
    }
    Ok(order)
}

/// One entry of a newc cpio archive.
fn cpio_entry(out: &mut Vec<u8>, ino: u32, name: &str, mode: u32, rdev: (u32, u32), data: &[u8]) {
    let namesize = name.len() + 1;
    let fields = [
        ino,
        mode,
        0,
        0,
        1,
        0,
        u32::try_from(data.len()).unwrap_or(u32::MAX),
        0,
        0,
        rdev.0,
        rdev.1,
        u32::try_from(namesize).unwrap_or(u32::MAX),
        0,
    ];
    out.extend_from_slice(b"070701");
    for f in fields {
        out.extend_from_slice(format!("{f:08x}").as_bytes());
    }
    out.extend_from_slice(name.as_bytes());
    out.push(0);
    while !out.len().is_multiple_of(4) {
        out.push(0);
    }
    out.extend_from_slice(data);
    while !out.len().is_multiple_of(4) {
        out.push(0);
    }
}

/// The guest's init: modules, the root (9p lower + tmpfs upper), pure cgroup v2, the layout,
/// `/tmp`, the command; then it prints its exit code and powers off.
const INIT: &str = r#"#!/bin/busybox sh
/bin/busybox --install -s /bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
for m in $(cat /modules.order); do insmod "/modules/$m" 2>/dev/null || echo "corral-vm: insmod $m failed"; done
mkdir -p /host /rw /newroot
# cache=loose: the guest keeps what it read of the host's tree (which does not change under
# a guest's command: CI builds before it boots guests); 10% less time for suite cases.
mount -t 9p -o trans=virtio,version=9p2000.L,ro,msize=524288,cache=loose host /host || { echo "corral-vm: 9p mount failed"; poweroff -f; }
mount -t tmpfs -o size=6g,mode=0755 rw /rw
mkdir -p /rw/upper /rw/work
mount -t overlay root -o lowerdir=/host,upperdir=/rw/upper,workdir=/rw/work /newroot || { echo "corral-vm: root overlay failed"; poweroff -f; }
mkdir -p /newroot/.corral-vm
cp /vm.* /newroot/.corral-vm/
cp /bin/busybox /newroot/.corral-vm/busybox
for d in proc sys dev; do mount --move /$d /newroot/$d; done
# The kernel's own modules where modprobe looks for them (the host has none for this kernel):
# modules load on demand, as on a real host.
MODS=$(cat /vm.modules)
mkdir -p /newroot/lib/modules && ln -sfn "$MODS" "/newroot/lib/modules/${MODS##*/}"
case "$(cat /vm.layout)" in
  systemd-*)
    # The host's own systemd as the guest's init, with one target of ours: the command's
    # service (and D-Bus). No fstab: the root is already built and the host's disks are not
    # the guest's.
    for u in service target; do cp /vm.corral-vm.$u /newroot/etc/systemd/system/corral-vm.$u; done
    : > /newroot/etc/fstab
    # Nor may systemd-tmpfiles empty /tmp at boot (tmp.conf's `D /tmp`): the host's folders
    # there (a checkout, as CI's) are bound back into the guest's own /tmp.
    mkdir -p /newroot/etc/tmpfiles.d && : > /newroot/etc/tmpfiles.d/tmp.conf
    # The host's root may carry a container marker; the guest is a VM, not a container.
    rm -f /newroot/.dockerenv
    exec switch_root /newroot /lib/systemd/systemd --unit=corral-vm.target ;;
esac
# A real root, not a chroot: user namespaces cannot be made from inside a chroot.
exec switch_root /newroot /.corral-vm/busybox sh /.corral-vm/vm.stage2
"#;

/// The guest's target under systemd: the command's service and the system bus.
const SYSTEMD_TARGET: &str = "[Unit]
Description=corral-vm: the command
Requires=corral-vm.service dbus.socket
After=corral-vm.service
AllowIsolate=yes
";

/// The command's service under systemd. `systemd-service`: a `Delegate=yes` service whose main
/// process is the command. `systemd-session`: an ordinary service (no delegation) where the
/// command runs beside another process, as in a login session's scope. The exit code is
/// printed, and the guest powered off, once the main process has ended.
fn systemd_service(layout: &str) -> String {
    let delegate = if layout == "systemd-service" {
        "Delegate=yes\n"
    } else {
        ""
    };
    format!(
        "[Unit]
Description=corral-vm: the command ({layout})
Requires=dbus.socket
After=dbus.socket basic.target
[Service]
Type=exec
{delegate}ExecStart=/.corral-vm/busybox sh /.corral-vm/vm.stage2
ExecStopPost=/.corral-vm/busybox sh -c 'echo \"corral-vm: exit $$EXIT_STATUS\" > /dev/console; /.corral-vm/busybox poweroff -f'
StandardInput=null
StandardOutput=tty
StandardError=inherit
TTYPath=/dev/console
TTYReset=no
TTYVHangup=no
TimeoutStartSec=infinity
"
    )
}

/// Stage two, in the real root: cgroup v2, the layout, `/tmp`, the command.
const STAGE2: &str = r#"B=/.corral-vm/busybox
V=/.corral-vm
off() { $B poweroff -f; }
LAYOUT=$($B cat $V/vm.layout)
case "$LAYOUT" in
  systemd-*) ;; # systemd mounted cgroup2, /run, /dev/shm and /dev/pts
  *)
    $B mount -t cgroup2 cgroup2 /sys/fs/cgroup || { echo "corral-vm: cgroup2 mount failed"; off; }
    $B mkdir -p /dev/shm /run /dev/pts
    $B mount -t tmpfs shm /dev/shm; $B mount -t tmpfs run /run; $B mount -t devpts pts /dev/pts
    # Loopback up, as on every real host (systemd does it in its layouts): tests' controls
    # connect to 127.0.0.1.
    $B ip link set lo up ;;
esac
TMP=$($B cat $V/vm.tmp)
# Host folders under /tmp the command needs (the checkout, when it lives there): the guest's
# own /tmp hides the host's, so they are bound back at the same paths.
KEEP=$($B cat $V/vm.keep)
# Private: under systemd the root is a shared mount, and the guest's /tmp mounted below would
# otherwise propagate onto this bind too and hide the host's folders.
if [ -n "$KEEP" ]; then
  $B mkdir -p $V/hosttmp && $B mount --bind /tmp $V/hosttmp && $B mount --make-rprivate $V/hosttmp
fi
if [ "$TMP" = ext4 ]; then
  # The disk's node appears when virtio_blk's probe finishes (asynchronously): wait for it,
  # at most 10 s.
  i=0; while [ ! -b /dev/vda ] && [ $i -lt 100 ]; do $B sleep 0.1; i=$((i+1)); done
  [ -b /dev/vda ] || echo "corral-vm: no /dev/vda ($($B ls /sys/block | $B tr '\n' ' '))"
  $B mount -t ext4 /dev/vda /tmp || { echo "corral-vm: ext4 /tmp failed"; off; }
else
  $B mount -t tmpfs -o size=4g tmp /tmp
fi
$B chmod 1777 /tmp
for k in $KEEP; do
  $B mkdir -p "$k" && $B mount --bind "$V/hosttmp/${k#/tmp/}" "$k" || echo "corral-vm: binding $k failed"
done
CG=/sys/fs/cgroup
enable() { echo "+cpu +memory +pids" > "$1/cgroup.subtree_control" || echo "corral-vm: enabling controllers in $1 failed"; }
case "$LAYOUT" in
  root) TARGET=$CG ;;
  service)
    enable $CG; $B mkdir -p $CG/system.slice/corral.service; enable $CG/system.slice
    TARGET=$CG/system.slice/corral.service ;;
  session)
    enable $CG; $B mkdir -p $CG/user.slice/user-0.slice/session-1.scope
    enable $CG/user.slice; enable $CG/user.slice/user-0.slice
    TARGET=$CG/user.slice/user-0.slice/session-1.scope
    # The user's shell, beside corral in the same scope.
    $B sleep 100000 & echo $! > $TARGET/cgroup.procs ;;
  undelegated)
    $B mkdir -p $CG/system.slice/corral.service
    TARGET=$CG/system.slice/corral.service ;;
  partial)
    enable $CG; $B mkdir -p $CG/system.slice/corral.service
    echo "+memory +pids" > $CG/system.slice/cgroup.subtree_control
    TARGET=$CG/system.slice/corral.service ;;
  systemd-*)
    TARGET=$CG$($B sed -n 's/^0:://p' /proc/self/cgroup)
    if [ "$LAYOUT" = systemd-session ]; then $B sleep 100000 & fi
    echo "corral-vm: kernel $($B uname -r), layout $LAYOUT ($TARGET, systemd $(/lib/systemd/systemd --version | $B head -1 | $B cut -d' ' -f2)), /tmp $TMP"
    # The command is this service's main process (systemd prints its exit status).
    cd "$($B cat $V/vm.cwd)" && HOME=/root XDG_CACHE_HOME=/tmp/.cache XDG_DATA_HOME=/tmp/.data \
      PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin exec /bin/sh -c "exec $($B cat $V/vm.cmd)"
    echo "corral-vm: exit 127"; off ;;
esac
echo "corral-vm: kernel $($B uname -r), layout $LAYOUT ($TARGET), /tmp $TMP"
# The command alone in the layout's cgroup, as a unit's main process is: the shell moves
# itself there and execs it (init stays in the root cgroup).
# corral's cache (the base checkouts: the workspace's lower layer) on that file system too:
# the guest's own root is 9p under an overlay, which no host has.
cd "$($B cat $V/vm.cwd)" && HOME=/root XDG_CACHE_HOME=/tmp/.cache XDG_DATA_HOME=/tmp/.data \
  PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin \
  /bin/sh -c "echo \$\$ > $TARGET/cgroup.procs && exec $($B cat $V/vm.cmd)"
echo "corral-vm: exit $?"
off
"#;

fn initramfs(kernel: &Kernel, layout: &str, tmp: &str, cwd: &Path, cmd: &str) -> Result<Vec<u8>> {
    let busybox = std::fs::read("/bin/busybox").context("busybox-static (/bin/busybox)")?;
    let mut out = Vec::new();
    let mut ino = 1;
    let mut add = |name: &str, mode: u32, rdev: (u32, u32), data: &[u8]| {
        cpio_entry(&mut out, ino, name, mode, rdev, data);
        ino += 1;
    };
    for d in [
        "bin", "dev", "proc", "sys", "modules", "host", "rw", "newroot", "tmp",
    ] {
        add(d, 0o040_755, (0, 0), b"");
    }
    add("dev/console", 0o020_600, (5, 1), b"");
    add("bin/busybox", 0o100_755, (0, 0), &busybox);
    add("init", 0o100_755, (0, 0), INIT.as_bytes());
    add("vm.layout", 0o100_644, (0, 0), layout.as_bytes());
    add("vm.tmp", 0o100_644, (0, 0), tmp.as_bytes());
    add(
        "vm.cwd",
        0o100_644,
        (0, 0),
        cwd.to_string_lossy().as_bytes(),
    );
    add("vm.cmd", 0o100_644, (0, 0), cmd.as_bytes());
    add(
        "vm.keep",
        0o100_644,
        (0, 0),
        kept_under_tmp(cwd, cmd).as_bytes(),
    );
    add("vm.stage2", 0o100_644, (0, 0), STAGE2.as_bytes());
    add(
        "vm.modules",
        0o100_644,
        (0, 0),
        kernel.modules.to_string_lossy().as_bytes(),
    );
    add(
        "vm.corral-vm.service",
        0o100_644,
        (0, 0),
        systemd_service(layout).as_bytes(),
    );
    add(
        "vm.corral-vm.target",
        0o100_644,
        (0, 0),
        SYSTEMD_TARGET.as_bytes(),
    );
    let mut order = Vec::new();
    for (name, data) in module_order(&kernel.modules)? {
        add(&format!("modules/{name}"), 0o100_644, (0, 0), &data);
        order.push(name);
    }
    add(
        "modules.order",
        0o100_644,
        (0, 0),
        order.join("\n").as_bytes(),
    );
    cpio_entry(&mut out, 0, "TRAILER!!!", 0, (0, 0), b"");
    Ok(out)
}

/// The top-level `/tmp/<name>` folders of the working folder and of absolute paths in the
/// command, space-separated: the guest mounts its own `/tmp` and binds these back.
fn kept_under_tmp(cwd: &Path, cmd: &str) -> String {
    let mut keep = BTreeSet::new();
    let cwd = cwd.to_string_lossy().into_owned();
    for word in std::iter::once(cwd.as_str()).chain(cmd.split_whitespace()) {
        if let Some(rest) = word.strip_prefix("/tmp/") {
            let top = rest.split('/').next().unwrap_or("");
            if !top.is_empty() && !top.contains(['\'', '"', '$', '`', '\\']) {
                keep.insert(format!("/tmp/{top}"));
            }
        }
    }
    keep.into_iter().collect::<Vec<_>>().join(" ")
}

/// The outcome of one guest.
struct Outcome {
    exit: Option<i32>,
    secs: f64,
    summary: String,
    /// The console's last lines, printed when the guest did not exit 0 (a panic's cause).
    tail: String,
}

fn boot(vm: &Path, k: &Kernel, layout: &str, tmp: &str, o: &Opts, root: &Path) -> Result<Outcome> {
    let work = vm.join(format!(
        "run-{}-{layout}-{tmp}-{}",
        k.name,
        std::process::id()
    ));
    std::fs::create_dir_all(&work)?;
    let initrd = work.join("initrd");
    std::fs::write(&initrd, initramfs(k, layout, tmp, root, &o.cmd)?)?;
    // setpriv --pdeathsig: the guest ends with this process, even when it is killed, so no
    // qemu is left running behind an interrupted `cargo xtask vm`.
    let mut qemu = Command::new("setpriv");
    qemu.args(["--pdeathsig", "KILL", "--", "qemu-system-x86_64"])
        .args(["-accel", "tcg,thread=single", "-m", "6G", "-smp", "2"])
        .args(["-nodefaults", "-nic", "none", "-nographic", "-no-reboot"])
        .args(["-serial", "stdio", "-monitor", "none"])
        .arg("-kernel")
        .arg(&k.vmlinuz)
        .arg("-initrd")
        .arg(&initrd)
        .args([
            "-append",
            "console=ttyS0 quiet loglevel=3 panic=-1 cgroup_no_v1=all rdinit=/init",
        ])
        .args([
            "-virtfs",
            "local,path=/,mount_tag=host,security_model=none,readonly=on,multidevs=remap",
        ]);
    if tmp == "ext4" {
        let disk = work.join("tmp.img");
        let f = std::fs::File::create(&disk)?;
        f.set_len(8 << 30)?;
        drop(f);
        run_ok(Command::new("mkfs.ext4").args(["-q", "-F"]).arg(&disk))?;
        qemu.arg("-drive")
            .arg(format!("file={},format=raw,if=virtio", disk.display()));
    }
    qemu.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let t = Instant::now();
    let mut child = qemu
        .spawn()
        .context("starting setpriv and qemu-system-x86_64 (bash scripts/setup.sh)")?;
    let stdout = child.stdout.take().context("qemu stdout")?;
    let verbose = o.verbose;
    let title = format!("{} / {layout} / {tmp}", k.package);
    // With --verbose the guest's console is shown as it comes (a long suite shows progress).
    // A terminal's status line is redrawn after `\r` with no `\n` (the guest's stderr is its
    // console, a TTY): the output is shown as it comes, each `\r` as a line end, or a log
    // shows a status line only when the next one replaces it.
    let reader = std::thread::spawn(move || {
        use std::io::Read as _;
        let mut buf = Vec::new();
        let mut r = stdout;
        let mut chunk = [0u8; 4096];
        if verbose {
            println!("----- {title} -----");
        }
        loop {
            let n = match r.read(&mut chunk) {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            buf.extend_from_slice(&chunk[..n]);
            if verbose {
                let text = String::from_utf8_lossy(&chunk[..n]);
                print!("{}", text.replace("\r\n", "\n").replace('\r', "\n"));
                let _ = std::io::stdout().flush();
            }
        }
        buf
    });
    let mut timed_out = false;
    loop {
        if child.try_wait()?.is_some() {
            break;
        }
        if t.elapsed() > o.timeout {
            let _ = child.kill();
            let _ = child.wait();
            timed_out = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    let out = String::from_utf8_lossy(&reader.join().unwrap_or_default()).into_owned();
    let _ = std::fs::remove_dir_all(&work);
    let exit = out
        .lines()
        .find_map(|l| l.trim().strip_prefix("corral-vm: exit "))
        .and_then(|c| c.trim().parse().ok());
    let summary = summarize(&out, timed_out);
    let lines: Vec<&str> = out.lines().collect();
    let tail = lines[lines.len().saturating_sub(60)..].join("\n");
    Ok(Outcome {
        exit,
        secs: t.elapsed().as_secs_f64(),
        summary,
        tail,
    })
}

/// One line of what the guest said: the init's own failure, or the command's last line and
/// the first reason corral gave for a missing capability.
fn summarize(out: &str, timed_out: bool) -> String {
    if timed_out {
        return "timed out".into();
    }
    let lines: Vec<&str> = out.lines().map(str::trim).collect();
    if let Some(l) = lines
        .iter()
        .find(|l| l.starts_with("corral-vm:") && l.contains("failed"))
    {
        return (*l).to_owned();
    }
    let exit_at = lines
        .iter()
        .position(|l| l.starts_with("corral-vm: exit"))
        .unwrap_or(lines.len());
    let last = lines[..exit_at]
        .iter()
        .rev()
        .find(|l| !l.is_empty())
        .copied()
        .unwrap_or("");
    // The first refusal corral explains ("... failed: <why>; ...").
    let cause = lines
        .iter()
        .filter(|l| l.starts_with("MISSING"))
        .find_map(|l| {
            let at = l.find("failed: ")?;
            Some(
                l[at + 8..]
                    .split(';')
                    .next()
                    .unwrap_or("")
                    .trim()
                    .to_owned(),
            )
        });
    match cause {
        Some(c) if !c.is_empty() => format!("{last} | first cause: {c}"),
        _ => last.to_owned(),
    }
}

/// Downloads and unpacks the named kernels (`6.1`, `6.12`, `7.x`) before guests that run at
/// the same time would each fetch them.
pub fn fetch(root: &Path, names: &[&str]) -> Result<()> {
    let vm = root.join("target/vm");
    std::fs::create_dir_all(&vm)?;
    for (name, suite, spec) in KERNELS.iter().filter(|k| names.contains(&k.0)) {
        fetch_kernel(&vm, name, *suite, spec)?;
    }
    Ok(())
}

pub fn run(root: &Path, args: &[String]) -> Result<()> {
    let o = parse(root, args)?;
    let vm = root.join("target/vm");
    std::fs::create_dir_all(&vm)?;
    if o.kernels.iter().any(|k| k == "ubuntu-24.04") {
        // Ubuntu's AppArmor parser beside its kernel, for tests/guest/apparmor.sh.
        let dir = ubuntu_apparmor(root)?;
        println!("Ubuntu 24.04's AppArmor parser: {}", dir.display());
    }
    let mut rows = Vec::new();
    for (name, suite, spec) in KERNELS
        .iter()
        .filter(|k| o.kernels.iter().any(|n| n == k.0))
    {
        let k = fetch_kernel(&vm, name, *suite, spec)?;
        for layout in &o.layouts {
            for tmp in &o.tmps {
                let r = boot(&vm, &k, layout, tmp, &o, root)?;
                println!(
                    "{:<6} {:<12} {:<6} exit {:<4} {:>6.1}s  {}",
                    k.name,
                    layout,
                    tmp,
                    r.exit.map_or("?".into(), |c| c.to_string()),
                    r.secs,
                    truncate(&r.summary, 160)
                );
                if r.exit != Some(0) && !o.verbose {
                    // What the guest said last: the command's error or the kernel's panic.
                    println!("----- the console's last lines -----\n{}\n-----", r.tail);
                }
                let _ = std::io::stdout().flush();
                rows.push((k.package.clone(), layout.clone(), tmp.clone(), r));
            }
        }
    }
    println!("\nkernel package                         layout       /tmp   result");
    for (pkg, layout, tmp, r) in &rows {
        println!(
            "{pkg:<38} {layout:<12} {tmp:<6} {}",
            match r.exit {
                Some(0) => "ok".to_owned(),
                Some(c) => format!("exit {c}: {}", truncate(&r.summary, 120)),
                None => format!("no exit: {}", truncate(&r.summary, 120)),
            }
        );
    }
    if rows.iter().any(|r| r.3.exit != Some(0)) {
        bail!("some guests did not exit 0");
    }
    Ok(())
}

fn truncate(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_owned()
    } else {
        format!("{}...", s.chars().take(n).collect::<String>())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpio_entries_are_newc_and_aligned() {
        let mut out = Vec::new();
        cpio_entry(&mut out, 7, "init", 0o100_755, (0, 0), b"#!/bin/sh\n");
        cpio_entry(&mut out, 8, "dev/console", 0o020_600, (5, 1), b"");
        assert!(out.starts_with(b"070701"));
        assert_eq!(out.len() % 4, 0);
        // ino, mode, then the file size (field 7) in hex.
        assert_eq!(&out[6..14], b"00000007");
        assert_eq!(&out[14..22], b"000081ed");
        assert_eq!(&out[54..62], b"0000000a");
        // The device node's rdev major/minor (fields 10 and 11).
        let second = out
            .windows(6)
            .skip(1)
            .position(|w| w == b"070701")
            .map(|i| i + 1)
            .unwrap();
        let f = |n: usize| &out[second + 6 + n * 8..second + 6 + (n + 1) * 8];
        assert_eq!(f(9), b"00000005");
        assert_eq!(f(10), b"00000001");
    }

    #[test]
    fn module_depends_reads_the_modinfo_list() {
        let modinfo = b"\0license=GPL\0depends=netfs,9pnet\0intree=Y\0";
        assert_eq!(module_depends(modinfo), vec!["netfs", "9pnet"]);
        assert_eq!(module_depends(b"\0depends=\0"), Vec::<String>::new());
        assert_eq!(module_depends(b"\0license=GPL\0"), Vec::<String>::new());
        // Dashes in module names are underscores in the kernel's view.
        assert_eq!(
            module_depends(b"\0depends=crc32c-generic\0"),
            vec!["crc32c_generic"]
        );
    }

    #[test]
    fn the_newest_kernel_package_sorts_last() {
        let mut v = [
            "linux-image-6.12.113+deb12-amd64-unsigned",
            "linux-image-6.12.9+deb12-amd64-unsigned",
            "linux-image-6.12.117+deb12-amd64-unsigned",
        ];
        v.sort_by_key(|a| version_key(a));
        assert_eq!(v.last(), Some(&"linux-image-6.12.117+deb12-amd64-unsigned"));
    }

    #[test]
    fn host_folders_under_tmp_are_kept() {
        assert_eq!(
            kept_under_tmp(
                Path::new("/tmp/ci-clone"),
                "/tmp/ci-clone/target/debug/corral probe"
            ),
            "/tmp/ci-clone"
        );
        assert_eq!(
            kept_under_tmp(Path::new("/work/main"), "/tmp/a/x demo /tmp/b"),
            "/tmp/a /tmp/b"
        );
        assert_eq!(kept_under_tmp(Path::new("/work/main"), "corral probe"), "");
    }

    #[test]
    fn summaries_name_the_first_refusal() {
        let out = "MISSING  cpu_limit  root: x; sandbox run: MISSING probe run of /usr/bin/true failed: the reason; more\n9 capability(ies) missing: no worker can run here\ncorral-vm: exit 3\n";
        assert_eq!(
            summarize(out, false),
            "9 capability(ies) missing: no worker can run here | first cause: the reason"
        );
        assert_eq!(summarize("", true), "timed out");
        assert_eq!(
            summarize("corral-vm: 9p mount failed\n", false),
            "corral-vm: 9p mount failed"
        );
    }
}
