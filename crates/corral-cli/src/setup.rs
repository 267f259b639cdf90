//! `corral setup apparmor` (issue 13, ADR-0080): on hosts whose AppArmor restricts unprivileged
//! user namespaces (`kernel.apparmor_restrict_unprivileged_userns = 1`, Ubuntu 23.10 and
//! later), an ordinary user's corral gets a user namespace without capabilities, and rootless
//! mode is refused. Root installs, once, a profile that allows `userns` for this binary, as
//! Ubuntu's own per-application profiles do (and bubblewrap's `bwrap-userns-restrict`).
//!
//! The profile hands a permission to whatever file is at the path it names, so the path must
//! be one only root can change: the binary and every folder above it owned by root and not
//! writable by group or others (a sticky folder such as /tmp is refused too: root's file there
//! cannot be replaced, but its name could be taken first). The parser is looked for at fixed
//! paths, never through PATH (this runs as root).

use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use clap::{Args, Subcommand};

use crate::exit;

#[derive(Subcommand, Debug)]
pub enum SetupCommand {
    /// Install (as root, once) an AppArmor profile allowing user namespaces for this binary:
    /// what rootless mode needs where kernel.apparmor_restrict_unprivileged_userns = 1.
    Apparmor(ApparmorArgs),
}

#[derive(Args, Debug)]
pub struct ApparmorArgs {
    /// Print the profile and where it would go; write and load nothing.
    #[arg(long)]
    pub print: bool,
    /// The folder of AppArmor's profiles.
    #[arg(long, default_value = "/etc/apparmor.d", value_name = "DIR")]
    pub profile_dir: PathBuf,
}

/// The profile's name, and its file's name under the profile folder.
pub const PROFILE: &str = "corral";
/// The first line of every profile this command writes: a file without it is not replaced.
const HEADER: &str = "# Written by `corral setup apparmor`";
/// Where AppArmor's parser is installed (Debian, Ubuntu; merged /usr or not).
const PARSERS: &[&str] = &["/usr/sbin/apparmor_parser", "/sbin/apparmor_parser"];

pub fn run(cmd: &SetupCommand) -> u8 {
    match cmd {
        SetupCommand::Apparmor(args) => match apparmor(args) {
            Ok(()) => exit::OK,
            Err(e) => {
                eprintln!("corral: setup apparmor: {e}");
                exit::FAILED
            }
        },
    }
}

fn apparmor(args: &ApparmorArgs) -> Result<(), String> {
    let exe = std::env::current_exe()
        .and_then(|p| p.canonicalize())
        .map_err(|e| format!("cannot find corral's own executable: {e}"))?;
    let text = profile(&exe)?;
    let file = args.profile_dir.join(PROFILE);
    if args.print {
        println!("# {}", file.display());
        print!("{text}");
        return Ok(());
    }
    if !rustix::process::geteuid().is_root() {
        return Err("needs root (once): run `sudo corral setup apparmor` \
                    (or `corral setup apparmor --print` to see the profile)"
            .into());
    }
    if !Path::new("/sys/kernel/security/apparmor/profiles").exists() {
        return Err("AppArmor is not enabled on this host (no \
                    /sys/kernel/security/apparmor/profiles): rootless mode needs no profile here"
            .into());
    }
    only_root_can_change(&exe)?;
    let parser = PARSERS
        .iter()
        .map(Path::new)
        .find(|p| p.is_file())
        .ok_or_else(|| {
            format!(
                "AppArmor's parser is not installed ({}): install the apparmor package \
                 (version 4 or later, which knows `userns`)",
                PARSERS.join(", ")
            )
        })?;
    write_profile(&file, &text)?;
    let out = Command::new(parser)
        .arg("--replace")
        .arg(&file)
        .env_clear()
        .env("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")
        .output()
        .map_err(|e| format!("running {}: {e}", parser.display()))?;
    if !out.status.success() {
        return Err(format!(
            "{} --replace {} failed ({}): {} (the profile needs AppArmor 4's parser for \
             `abi <abi/4.0>` and `userns`; the file is left for you to fix or remove)",
            parser.display(),
            file.display(),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    let loaded = std::fs::read_to_string("/sys/kernel/security/apparmor/profiles")
        .map_err(|e| format!("reading the loaded profiles: {e}"))?;
    if !loaded
        .lines()
        .any(|l| l.starts_with(&format!("{PROFILE} (")))
    {
        return Err(format!(
            "{} --replace {} succeeded but the kernel lists no profile {PROFILE:?}",
            parser.display(),
            file.display()
        ));
    }
    println!(
        "corral: setup apparmor: loaded the profile {PROFILE:?} ({}) allowing user namespaces \
         for {}; it is loaded again at every boot. Undo: sudo {} --remove {} && sudo rm {}",
        file.display(),
        exe.display(),
        parser.display(),
        file.display(),
        file.display()
    );
    Ok(())
}

/// The profile for `exe`: AppArmor 4's `userns` rule for this one path, unconfined otherwise
/// (the sandbox's confinement is corral's own), with the site's local additions.
pub fn profile(exe: &Path) -> Result<String, String> {
    let path = exe
        .to_str()
        .filter(|p| {
            p.starts_with('/')
                && p.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"/._+-".contains(&b))
        })
        .ok_or_else(|| {
            format!(
                "corral's path {} has characters an AppArmor profile would read as a pattern \
                 or cannot hold: install corral under a plain path (letters, digits, / . _ + -), \
                 e.g. /usr/local/bin/corral",
                exe.display()
            )
        })?;
    Ok(format!(
        "{HEADER} for {path}.\n\
         # Lets an ordinary user's corral make the user namespace of its rootless mode where\n\
         # kernel.apparmor_restrict_unprivileged_userns = 1. Remove: apparmor_parser --remove\n\
         # on this file, then delete it.\n\
         abi <abi/4.0>,\n\
         include <tunables/global>\n\
         \n\
         profile {PROFILE} {path} flags=(unconfined) {{\n\
         \x20 userns,\n\
         \n\
         \x20 include if exists <local/{PROFILE}>\n\
         }}\n"
    ))
}

/// The binary and every folder above it: owned by root, writable by root alone.
pub fn only_root_can_change(exe: &Path) -> Result<(), String> {
    only_root_can_change_up_to(exe, None)
}

/// The same walk, stopped after `top` when given (the unit tests' own folder).
fn only_root_can_change_up_to(exe: &Path, top: Option<&Path>) -> Result<(), String> {
    let mut at = Some(exe);
    while let Some(p) = at {
        let m = std::fs::symlink_metadata(p).map_err(|e| format!("{}: {e}", p.display()))?;
        if m.uid() != 0 || m.mode() & 0o022 != 0 {
            return Err(format!(
                "{} is {} (owner uid {}, mode {:o}): the profile would let whoever can change it \
                 put another program at {} with the right to make user namespaces; install \
                 corral where only root can write (e.g. /usr/local/bin) and run setup from there",
                p.display(),
                if m.uid() != 0 {
                    "not owned by root"
                } else {
                    "writable by group or others"
                },
                m.uid(),
                m.mode() & 0o7777,
                exe.display()
            ));
        }
        if Some(p) == top {
            break;
        }
        at = p.parent();
    }
    Ok(())
}

/// Writes the profile by rename (never half a file), refusing to replace a file this command
/// did not write.
fn write_profile(file: &Path, text: &str) -> Result<(), String> {
    match std::fs::read_to_string(file) {
        Ok(old) if !old.starts_with(HEADER) => {
            return Err(format!(
                "{} exists and was not written by corral setup apparmor: not replaced; move \
                 it away or merge `userns,` into it by hand",
                file.display()
            ));
        }
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(format!("{}: {e}", file.display())),
    }
    let dir = file
        .parent()
        .ok_or_else(|| format!("{} has no folder", file.display()))?;
    let tmp = dir.join(format!(".{PROFILE}.corral-setup-{}", std::process::id()));
    let write = || -> std::io::Result<()> {
        use std::io::Write as _;
        use std::os::unix::fs::OpenOptionsExt as _;
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o644)
            .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32)
            .open(&tmp)?;
        f.write_all(text.as_bytes())?;
        f.sync_all()?;
        std::fs::rename(&tmp, file)
    };
    write().map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        format!("writing {}: {e}", file.display())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_profile_allows_userns_for_exactly_this_path() {
        let p = profile(Path::new("/usr/local/bin/corral")).unwrap();
        assert!(p.starts_with(HEADER));
        assert!(p.contains("abi <abi/4.0>,"));
        assert!(
            p.contains("profile corral /usr/local/bin/corral flags=(unconfined) {\n  userns,\n")
        );
        assert!(p.contains("include if exists <local/corral>"));
    }

    #[test]
    fn a_path_the_profile_would_read_as_a_pattern_is_refused() {
        for bad in [
            "/opt/co*ral",
            "/opt/corral bin/corral",
            "/opt/{a,b}/corral",
            "/opt/x/corral\n}",
            "relative/corral",
        ] {
            let e = profile(Path::new(bad)).unwrap_err();
            assert!(e.contains("plain path"), "{bad}: {e}");
        }
    }

    #[test]
    fn a_binary_others_could_replace_is_refused() {
        // The whole chain up to / (with /tmp at 1777 on the way) is refused: a sticky folder
        // is writable by others.
        let base = tempdir();
        let dir = base.join("bin");
        std::fs::create_dir(&dir).unwrap();
        let exe = dir.join("corral");
        std::fs::write(&exe, b"x").unwrap();
        set_mode(&exe, 0o755);
        set_mode(&base, 0o755);
        let e = only_root_can_change(&exe).unwrap_err();
        assert!(
            e.contains("writable by group or others") || e.contains("not owned by root"),
            "{e}"
        );
        if !rustix::process::geteuid().is_root() {
            // As a user the files are the user's: refused for that, which is all there is to
            // see; the test command runs as root and checks each level below.
            assert!(e.contains("not owned by root"), "{e}");
            let _ = std::fs::remove_dir_all(&base);
            return;
        }
        set_mode(&dir, 0o777);
        let e = only_root_can_change_up_to(&exe, Some(&base)).unwrap_err();
        assert!(e.contains("bin is writable by group or others"), "{e}");
        // Control: the same chain once the folder is 0755.
        set_mode(&dir, 0o755);
        only_root_can_change_up_to(&exe, Some(&base)).unwrap();
        set_mode(&exe, 0o775);
        let e = only_root_can_change_up_to(&exe, Some(&base)).unwrap_err();
        assert!(e.contains("corral is writable by group or others"), "{e}");
        set_mode(&exe, 0o755);
        std::os::unix::fs::chown(&exe, Some(1000), None).unwrap();
        let e = only_root_can_change_up_to(&exe, Some(&base)).unwrap_err();
        assert!(e.contains("not owned by root (owner uid 1000"), "{e}");
        let _ = std::fs::remove_dir_all(&base);
    }

    fn tempdir() -> PathBuf {
        let d = std::env::temp_dir().join(format!(
            "corral-setup-test-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir(&d).unwrap();
        d
    }

    fn set_mode(p: &Path, mode: u32) {
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
    }

    #[test]
    fn a_profile_file_this_command_did_not_write_is_not_replaced() {
        let d = tempdir();
        let f = d.join(PROFILE);
        std::fs::write(&f, "profile corral /x { }\n").unwrap();
        let e = write_profile(&f, "new").unwrap_err();
        assert!(e.contains("not written by corral setup apparmor"), "{e}");
        assert_eq!(
            std::fs::read_to_string(&f).unwrap(),
            "profile corral /x { }\n"
        );
        // Control: its own file is replaced whole.
        let ours = profile(Path::new("/usr/bin/corral")).unwrap();
        std::fs::write(&f, &ours).unwrap();
        let newer = profile(Path::new("/usr/local/bin/corral")).unwrap();
        write_profile(&f, &newer).unwrap();
        assert_eq!(std::fs::read_to_string(&f).unwrap(), newer);
        assert_eq!(
            std::fs::read_dir(&d).unwrap().count(),
            1,
            "no temporary file left"
        );
        let _ = std::fs::remove_dir_all(&d);
    }
}
