//! The adversarial fixtures of `tests/adversarial/`.
//!
//! Sources, edited by hand and embedded with `include_str!` (so the suite also runs without a
//! checkout): `attacks/*.py|sh` (the attacks; several cases may share one), the shared code
//! they inline (`attacks/prelude.py|sh`, `netlib.py`, `steps.py`, `canary.py`), `repos/*.sh`
//! (the hostile repository builders) and `lab/labd.py` (the egress lab daemon). An attack is
//! runnable by hand from the folder: a line ending `# corral: inline NAME` sources NAME
//! beside it; the harness replaces each such line with NAME's text ([`runnable`]), so the
//! sandbox runs one self-contained file and needs nothing beside it.
//!
//! Generated (`cargo xtask fixtures`; `--check` fails with a diff on drift): `presets/<ID>.json`
//! (the AgentPreset whose fixed argv runs the case's attack; placeholders `{ATTACKS}`, `{N}`
//! filled at run time) and `README.md` (the index).

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt as _;
use std::path::Path;

use anyhow::{Result, bail};

use super::harness::{FIXTURES, preset_template};

const STANDARD_REPO: &str = include_str!("../../../tests/adversarial/repos/standard.sh");

/// The code attacks inline, by file name (beside them in `attacks/`).
const INLINED: [(&str, &str); 5] = [
    (
        "prelude.py",
        include_str!("../../../tests/adversarial/attacks/prelude.py"),
    ),
    (
        "prelude.sh",
        include_str!("../../../tests/adversarial/attacks/prelude.sh"),
    ),
    (
        "netlib.py",
        include_str!("../../../tests/adversarial/attacks/netlib.py"),
    ),
    (
        "steps.py",
        include_str!("../../../tests/adversarial/attacks/steps.py"),
    ),
    (
        "canary.py",
        include_str!("../../../tests/adversarial/attacks/canary.py"),
    ),
];

const INLINE_MARK: &str = "# corral: inline ";

/// The file the sandbox runs: the source with every `# corral: inline NAME` line replaced by
/// NAME's text. An unknown NAME is an error, never a line left to fail inside the sandbox.
pub fn runnable(source: &str) -> Result<String> {
    let mut out = String::with_capacity(source.len() + 16 * 1024);
    for line in source.split_inclusive('\n') {
        match line.trim_end().rsplit_once(INLINE_MARK) {
            Some((_, name)) => match INLINED.iter().find(|(n, _)| *n == name) {
                Some((_, text)) => out.push_str(text),
                None => bail!("an attack inlines {name:?}, which is not in attacks/"),
            },
            None => out.push_str(line),
        }
    }
    Ok(out)
}

/// A file of the folder: its content, whether it is executable, and whether it is generated
/// (checked for drift) or a source (embedded, written only where there is no checkout).
pub struct Fixture {
    pub content: String,
    pub executable: bool,
    pub generated: bool,
}

/// Every file of the folder, by path relative to it.
pub fn expected() -> BTreeMap<String, Fixture> {
    let mut files = BTreeMap::new();
    let source = |content: &str, executable: bool| Fixture {
        content: content.to_owned(),
        executable,
        generated: false,
    };
    let mut index = String::from(
        "# Adversarial fixtures\n\n\
         Run them with `cargo xtask adversarial` (README.md, \"Qualifying a host\"). Each case\n\
         attacks one guarantee from inside the sandbox through the real `corral run` path.\n\
         `attacks/` holds the sources, runnable by hand (`attacks/NET-01.py 1`); this index and\n\
         `presets/` are generated from the case table (`cargo xtask fixtures`; do not edit).\n\n\
         | case | guarantee | attack |\n|---|---|---|\n",
    );
    for case in super::cases::all() {
        let attack = match case.script {
            Some((file, body)) => {
                files.insert(format!("attacks/{file}"), source(body, true));
                let preset = preset_template(case.id, file);
                let mut p = serde_json::to_string_pretty(&preset).unwrap_or_default();
                p.push('\n');
                files.insert(
                    format!("presets/{}.json", case.id),
                    Fixture {
                        content: p,
                        executable: false,
                        generated: true,
                    },
                );
                format!("[attacks/{file}](attacks/{file})")
            }
            None => "(harness only)".to_owned(),
        };
        index.push_str(&format!(
            "| {} | {} | {} |\n",
            case.id,
            case.guarantee.replace('|', "\\|"),
            attack
        ));
    }
    for (name, text) in INLINED {
        files.insert(format!("attacks/{name}"), source(text, false));
    }
    files.insert("repos/standard.sh".into(), source(STANDARD_REPO, true));
    for (path, content, exec) in super::cases::extra_fixtures() {
        files.insert(path, source(&content, exec));
    }
    files.insert(
        "README.md".into(),
        Fixture {
            content: index,
            executable: false,
            generated: true,
        },
    );
    files
}

/// Writes (or checks) the generated files of the folder; with `sources`, writes the embedded
/// sources too (the suite without a checkout). Returns false on drift in check mode.
pub fn generate(root: &Path, check: bool, sources: bool) -> Result<bool> {
    let dir = root.join(FIXTURES);
    let files = expected();
    let mut ok = true;
    for (rel, f) in &files {
        let (content, exec) = (&f.content, &f.executable);
        let path = dir.join(rel);
        if f.generated || sources {
            ok &= crate::write_or_check(&path, content, check)?;
        }
        if path.exists() {
            let mode = std::fs::metadata(&path)?.permissions().mode();
            let want = if *exec { 0o755 } else { 0o644 };
            if mode & 0o777 != want {
                if check {
                    eprintln!(
                        "{} has mode {:o}, want {want:o}",
                        path.display(),
                        mode & 0o777
                    );
                    ok = false;
                } else {
                    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(want))?;
                }
            }
        }
    }
    // Files no case names any more.
    let mut stale = Vec::new();
    super::harness::walk(&dir, 4, &mut |p| {
        if p.is_file() {
            let rel = p
                .strip_prefix(&dir)
                .unwrap_or(p)
                .to_string_lossy()
                .into_owned();
            if !files.contains_key(&rel) {
                stale.push(p.to_path_buf());
            }
        }
    });
    for p in stale {
        if check {
            eprintln!(
                "{} is not used by any case: remove it (`cargo xtask fixtures`)",
                p.display()
            );
            ok = false;
        } else {
            std::fs::remove_file(&p)?;
            println!("removed {}", p.display());
        }
    }
    Ok(ok)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_attack_runs_as_one_self_contained_file() {
        let mut inlined = 0;
        for case in crate::adversarial::cases::all() {
            let Some((file, source)) = case.script else {
                continue;
            };
            let run = runnable(source).unwrap();
            assert!(run.starts_with("#!"), "{file} has no shebang");
            assert!(!run.contains(INLINE_MARK), "{file} keeps an inline line");
            let prelude = if file.ends_with(".py") {
                "prelude.py"
            } else {
                "prelude.sh"
            };
            let text = INLINED.iter().find(|(n, _)| *n == prelude).unwrap().1;
            assert!(run.contains(text), "{file} lacks its prelude");
            inlined += source.matches(INLINE_MARK).count();
        }
        // Every case inlines its prelude; the CAP, NET and FS/CRED canary cases a library too.
        assert!(inlined > 90, "only {inlined} inline lines");
    }

    #[test]
    fn an_unknown_inline_is_an_error_and_other_lines_stay() {
        let err = runnable("#!/bin/sh\n. ./x.sh  # corral: inline x.sh\n").unwrap_err();
        assert!(err.to_string().contains("\"x.sh\""), "{err}");
        // Control: a known name is replaced, every other line kept byte for byte.
        let ok = runnable("#!/bin/sh\n. ./p  # corral: inline prelude.sh\necho hi\n").unwrap();
        assert!(ok.starts_with("#!/bin/sh\n# shellcheck shell=sh\n"));
        assert!(ok.ends_with("\necho hi\n"));
    }
}
