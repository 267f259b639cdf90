//! Property: random worktree mutations made through a real overlayfs mount -> capture of the
//! upper layer -> `git apply --binary` on a fresh checkout of the base -> the same tree as the
//! mutated worktree (real git is the oracle), and the same changed-path set as git reports.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code"
)]

mod common;

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use common::{Canonical, Node, Overlay, apply_on_fresh, capture_upper};
use corral_contract::manifest::ChangeKind;
use proptest::prelude::*;

const DIRS: &[&str] = &["", "d1", "d1/d2", "d3", "d3/d4/d5", "build", "d1/d2/d6"];
/// Symlinks only ever point at these names, and never carry them, so no link points at a
/// link: `git apply` cannot replace a looping symlink by a directory (ELOOP), a git
/// limitation rather than a capture bug.
const LINK_TARGETS: &[&str] = &["g.txt", "bin.dat", "noeol"];
const FILES: &[&str] = &[
    "f0", "f1", "g.txt", "bin.dat", "é.txt", "noeol", "x.log", "a b", "d-1", "d1.c",
];

fn content() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        // Text lines, with or without a final newline.
        (prop::collection::vec("[a-z ]{0,12}", 0..6), any::<bool>()).prop_map(|(lines, eol)| {
            let mut s = lines.join("\n");
            if eol && !s.is_empty() {
                s.push('\n');
            }
            s.into_bytes()
        }),
        // Binary with NULs.
        prop::collection::vec(any::<u8>(), 0..300).prop_map(|mut v| {
            v.push(0);
            v
        }),
        Just(Vec::new()),
    ]
}

fn node() -> impl Strategy<Value = Node> {
    prop_oneof![
        4 => (content(), any::<bool>()).prop_map(|(data, exec)| Node::File { data, exec }),
        1 => (0usize..3, 0usize..LINK_TARGETS.len()).prop_map(|(up, f)| Node::Link(format!("{}{}", "../".repeat(up), LINK_TARGETS[f]).into_bytes())),
    ]
}

fn rel(dir: usize, name: usize) -> String {
    let d = DIRS[dir % DIRS.len()];
    let f = FILES[name % FILES.len()];
    if d.is_empty() {
        f.to_owned()
    } else {
        format!("{d}/{f}")
    }
}

/// Clamps a relative link target so it never leaves the repository.
fn clamp_link(path: &str, node: Node) -> Node {
    match node {
        Node::Link(t)
            if LINK_TARGETS
                .iter()
                .any(|n| path.rsplit('/').next() == Some(*n)) =>
        {
            Node::File {
                data: t,
                exec: false,
            }
        }
        Node::Link(t) => {
            let depth = path.matches('/').count();
            let t = String::from_utf8(t).unwrap();
            let up = t.matches("../").count();
            let rest = t.trim_start_matches("../");
            Node::Link(format!("{}{}", "../".repeat(up.min(depth)), rest).into_bytes())
        }
        n => n,
    }
}

#[derive(Debug, Clone)]
enum Mut {
    Write {
        dir: usize,
        name: usize,
        node: Node,
    },
    Append {
        pick: usize,
        data: Vec<u8>,
    },
    Delete {
        pick: usize,
    },
    DeleteDir {
        dir: usize,
    },
    Rename {
        pick: usize,
        dir: usize,
        name: usize,
    },
    Chmod {
        pick: usize,
    },
    Touch {
        pick: usize,
    },
    ChmodSame {
        pick: usize,
    },
    RecreateDir {
        dir: usize,
        files: Vec<(usize, Node)>,
    },
    FileToDir {
        pick: usize,
        name: usize,
        data: Vec<u8>,
    },
}

fn mutation() -> impl Strategy<Value = Mut> {
    prop_oneof![
        4 => (0..DIRS.len(), 0..FILES.len(), node()).prop_map(|(dir, name, node)| Mut::Write { dir, name, node }),
        2 => (any::<usize>(), content()).prop_map(|(pick, data)| Mut::Append { pick, data }),
        2 => any::<usize>().prop_map(|pick| Mut::Delete { pick }),
        1 => (1..DIRS.len()).prop_map(|dir| Mut::DeleteDir { dir }),
        2 => (any::<usize>(), 0..DIRS.len(), 0..FILES.len()).prop_map(|(pick, dir, name)| Mut::Rename { pick, dir, name }),
        2 => any::<usize>().prop_map(|pick| Mut::Chmod { pick }),
        1 => any::<usize>().prop_map(|pick| Mut::Touch { pick }),
        1 => any::<usize>().prop_map(|pick| Mut::ChmodSame { pick }),
        1 => (1..DIRS.len(), prop::collection::vec((0..FILES.len(), node()), 0..4)).prop_map(|(dir, files)| Mut::RecreateDir { dir, files }),
        1 => (any::<usize>(), 0..FILES.len(), content()).prop_map(|(pick, name, data)| Mut::FileToDir { pick, name, data }),
    ]
}

/// Files and symlinks currently in the merged view (relative paths), `.gitignore` excluded.
fn leaves(root: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![PathBuf::new()];
    while let Some(d) = stack.pop() {
        let mut names: Vec<_> = fs::read_dir(root.join(&d))
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        names.sort();
        for n in names {
            let r = d.join(&n);
            let md = fs::symlink_metadata(root.join(&r)).unwrap();
            if md.is_dir() {
                stack.push(r);
            } else if r.to_str() != Some(".gitignore") {
                out.push(r.to_str().unwrap().to_owned());
            }
        }
    }
    out.sort();
    out
}

fn remove_any(p: &Path) {
    match fs::symlink_metadata(p) {
        Ok(m) if m.is_dir() => fs::remove_dir_all(p).unwrap(),
        Ok(_) => fs::remove_file(p).unwrap(),
        Err(_) => {}
    }
}

/// Makes every ancestor of `rel` a directory (replacing files in the way) and clears `rel`.
fn prepare(root: &Path, rel: &str) {
    let mut cur = root.to_path_buf();
    let parts: Vec<&str> = rel.split('/').collect();
    for part in &parts[..parts.len() - 1] {
        cur.push(part);
        match fs::symlink_metadata(&cur) {
            Ok(m) if m.is_dir() => {}
            Ok(_) => {
                fs::remove_file(&cur).unwrap();
                fs::create_dir(&cur).unwrap();
            }
            Err(_) => fs::create_dir(&cur).unwrap(),
        }
    }
    remove_any(&root.join(rel));
}

fn apply(root: &Path, m: &Mut) {
    let pick = |i: usize| {
        let l = leaves(root);
        if l.is_empty() {
            None
        } else {
            Some(l[i % l.len()].clone())
        }
    };
    match m {
        Mut::Write { dir, name, node } => {
            let r = rel(*dir, *name);
            prepare(root, &r);
            common::write_node(root, &r, &clamp_link(&r, node.clone()));
        }
        Mut::Append { pick: i, data } => {
            if let Some(r) = pick(*i) {
                let p = root.join(&r);
                if fs::symlink_metadata(&p).unwrap().is_file() {
                    let mut old = fs::read(&p).unwrap();
                    old.extend_from_slice(data);
                    fs::write(&p, old).unwrap();
                }
            }
        }
        Mut::Delete { pick: i } => {
            if let Some(r) = pick(*i) {
                fs::remove_file(root.join(r)).unwrap();
            }
        }
        Mut::DeleteDir { dir } => remove_any(&root.join(DIRS[*dir])),
        Mut::Rename { pick: i, dir, name } => {
            if let Some(from) = pick(*i) {
                let to = rel(*dir, *name);
                if to != from && !to.starts_with(&format!("{from}/")) {
                    let src = root.join(&from);
                    if fs::symlink_metadata(&src).unwrap().file_type().is_symlink() {
                        // Moving a relative link changes what it points at; keep it inside.
                        use std::os::unix::ffi::OsStrExt;
                        let target = fs::read_link(&src).unwrap().as_os_str().as_bytes().to_vec();
                        fs::remove_file(&src).unwrap();
                        prepare(root, &to);
                        common::write_node(root, &to, &clamp_link(&to, Node::Link(target)));
                    } else {
                        let tmp = root.join(".rename-tmp");
                        fs::rename(&src, &tmp).unwrap();
                        prepare(root, &to);
                        fs::rename(&tmp, root.join(&to)).unwrap();
                    }
                }
            }
        }
        Mut::Chmod { pick: i } => {
            if let Some(r) = pick(*i) {
                let p = root.join(r);
                let md = fs::symlink_metadata(&p).unwrap();
                if md.is_file() {
                    let mode = md.permissions().mode() ^ 0o111;
                    fs::set_permissions(&p, fs::Permissions::from_mode(mode)).unwrap();
                }
            }
        }
        Mut::Touch { pick: i } => {
            if let Some(r) = pick(*i) {
                let p = root.join(r);
                if fs::symlink_metadata(&p).unwrap().is_file() {
                    drop(fs::OpenOptions::new().append(true).open(&p).unwrap());
                }
            }
        }
        Mut::ChmodSame { pick: i } => {
            if let Some(r) = pick(*i) {
                let p = root.join(r);
                let md = fs::symlink_metadata(&p).unwrap();
                if md.is_file() {
                    fs::set_permissions(&p, md.permissions()).unwrap();
                }
            }
        }
        Mut::RecreateDir { dir, files } => {
            let d = DIRS[*dir];
            remove_any(&root.join(d));
            prepare(root, &format!("{d}/placeholder"));
            fs::create_dir_all(root.join(d)).unwrap();
            for (name, node) in files {
                let r = format!("{d}/{}", FILES[*name]);
                prepare(root, &r);
                common::write_node(root, &r, &clamp_link(&r, node.clone()));
            }
        }
        Mut::FileToDir {
            pick: i,
            name,
            data,
        } => {
            if let Some(r) = pick(*i) {
                fs::remove_file(root.join(&r)).unwrap();
                fs::create_dir(root.join(&r)).unwrap();
                fs::write(root.join(&r).join(FILES[*name]), data).unwrap();
            }
        }
    }
}

fn letter(k: ChangeKind) -> char {
    match k {
        ChangeKind::Added => 'A',
        ChangeKind::Deleted => 'D',
        ChangeKind::Modified | ChangeKind::ModeChanged => 'M',
        ChangeKind::TypeChanged => 'T',
    }
}

fn check_case(base: Vec<(usize, usize, Node)>, muts: Vec<Mut>) {
    check_case_in(base, muts, "sha1");
}

fn check_case_in(base: Vec<(usize, usize, Node)>, muts: Vec<Mut>, format: &str) {
    let mut files: Vec<(String, Node)> = vec![(
        ".gitignore".to_owned(),
        Node::File {
            data: b"*.log\nbuild/\n".to_vec(),
            exec: false,
        },
    )];
    for (d, n, node) in base {
        let r = rel(d, n);
        if !files.iter().any(|(p, _)| *p == r) {
            let node = clamp_link(&r, node);
            files.push((r, node));
        }
    }
    let refs: Vec<(&str, Node)> = files.iter().map(|(p, n)| (p.as_str(), n.clone())).collect();
    let canonical = Canonical::with_format(&refs, format);
    let mut ovl = Overlay::new(&canonical);
    for m in &muts {
        apply(&ovl.merged, m);
    }
    // Copy the merged view out before unmounting: it is the worktree the patch must reproduce.
    let scratch = tempfile::Builder::new()
        .prefix("corral-cap-rt-")
        .tempdir()
        .unwrap();
    let expected_dir = scratch.path().join("expected");
    let st = std::process::Command::new("cp")
        .arg("-a")
        .arg(&ovl.merged)
        .arg(&expected_dir)
        .status()
        .unwrap();
    assert!(st.success());
    ovl.unmount();

    let result = capture_upper(&canonical, &ovl.upper, &["*"], &[], 1 << 30);
    assert!(
        result.rejections.is_empty(),
        "unexpected rejections: {:?}\nmutations: {muts:?}",
        result.rejections
    );
    let patch = result.patch.clone().unwrap();

    let applied = apply_on_fresh(&canonical, &patch, scratch.path());
    let want = canonical.tree_of(&expected_dir);
    let got = canonical.tree_of(&applied);
    assert_eq!(
        got,
        want,
        "trees differ\nmutations: {muts:?}\npatch:\n{}",
        String::from_utf8_lossy(&patch)
    );

    // Same changed-path set as git's own comparison of base and worktree.
    let mut git_view = canonical.name_status(&canonical.base_tree(), &want);
    git_view.sort();
    let mut ours: Vec<(char, String)> = result
        .changed_paths
        .iter()
        .map(|c| (letter(c.change), c.path.clone()))
        .collect();
    ours.sort();
    assert_eq!(ours, git_view, "changed paths differ\nmutations: {muts:?}");

    // Ignored files are exactly the untracked *.log and build/ files.
    for p in &result.ignored_paths {
        assert!(
            p.split('/').any(|c| c.ends_with(".log") || c == "build"),
            "{p} listed as ignored"
        );
    }
}

proptest! {
    // 32 cases by default (about 10 s); CORRAL_PROPTEST_CASES=N for a longer run.
    #![proptest_config(ProptestConfig {
        cases: std::env::var("CORRAL_PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(32),
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn capture_roundtrips_through_git_apply(
        base in prop::collection::vec((0..DIRS.len(), 0..FILES.len(), node()), 1..14),
        muts in prop::collection::vec(mutation(), 1..10),
    ) {
        check_case(base, muts);
    }
}

#[test]
fn hand_picked_cases_roundtrip() {
    let f = |d: &[u8], exec| Node::File {
        data: d.to_vec(),
        exec,
    };
    // Type changes both ways, opaque directory, mode change, deletion of a whole tree,
    // binary, missing newline, symlink retarget, and a copy-up without change.
    check_case(
        vec![
            (0, 0, f(b"one\ntwo\n", false)),
            (1, 1, f(b"x", true)),
            (2, 2, f(b"\0\x01bin", false)),
            (3, 1, Node::Link(b"../f0".to_vec())),
            (4, 4, f(b"deep\n", false)),
        ],
        vec![
            Mut::Write {
                dir: 0,
                name: 0,
                node: f(b"one\ntwo", false),
            },
            Mut::Chmod { pick: 0 },
            Mut::RecreateDir {
                dir: 1,
                files: vec![(1, f(b"x", true)), (5, f(b"new\n", false))],
            },
            Mut::DeleteDir { dir: 4 },
            Mut::Touch { pick: 1 },
            Mut::Write {
                dir: 3,
                name: 1,
                node: Node::Link(b"../g.txt".to_vec()),
            },
            Mut::FileToDir {
                pick: 2,
                name: 0,
                data: b"in dir\n".to_vec(),
            },
            Mut::Write {
                dir: 0,
                name: 6,
                node: f(b"ignored log\n", false),
            },
        ],
    );
}

#[test]
fn symlink_to_dir_creation_and_unicode() {
    check_case(
        vec![(
            0,
            4,
            Node::File {
                data: "é\n".as_bytes().to_vec(),
                exec: false,
            },
        )],
        vec![
            Mut::Write {
                dir: 6,
                name: 7,
                node: Node::Link(b"../../../f0".to_vec()),
            },
            Mut::Write {
                dir: 2,
                name: 9,
                node: Node::File {
                    data: vec![0xff; 5000],
                    exec: false,
                },
            },
        ],
    );
}

#[test]
fn recreated_directory_below_opaque_parent() {
    // rm -rf d1; mkdir -p d1/d2/d6: d1 is opaque, d1/d2 is not, but its base content is gone.
    let f = |d: &[u8]| Node::File {
        data: d.to_vec(),
        exec: false,
    };
    check_case(
        vec![
            (1, 0, f(b"a\n")),
            (2, 1, f(b"b\n")),
            (2, 2, f(b"c\n")),
            (6, 3, f(b"d\n")),
        ],
        vec![
            Mut::DeleteDir { dir: 1 },
            Mut::Write {
                dir: 6,
                name: 0,
                node: f(b""),
            },
        ],
    );
}

#[test]
fn sha256_repository_roundtrips() {
    let f = |d: &[u8], exec| Node::File {
        data: d.to_vec(),
        exec,
    };
    check_case_in(
        vec![
            (0, 0, f(b"one\n", false)),
            (1, 1, f(b"\0bin", true)),
            (4, 4, f(b"deep\n", false)),
        ],
        vec![
            Mut::Write {
                dir: 0,
                name: 0,
                node: f(b"one\ntwo", false),
            },
            Mut::Chmod { pick: 1 },
            Mut::DeleteDir { dir: 4 },
            Mut::Write {
                dir: 2,
                name: 3,
                node: f(&[0xffu8; 3000], false),
            },
        ],
        "sha256",
    );
}
