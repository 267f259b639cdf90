//! Reading a base commit's whole tree (every tree and blob, content included) the way the
//! base checkout does: corral's hardened `git cat-file --batch` session (capture::git), pipelined
//! in batches, against gix-odb in process. Side by side, medians, ratio.
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use corral_capture::git::GitSandbox;
use corral_capture::objects::{MODE_TREE, ObjectFormat, Oid};

fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args([
            "-c",
            "user.name=b",
            "-c",
            "user.email=b@b",
            "-c",
            "gc.auto=0",
        ])
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{args:?} {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn make_repo(dir: &Path, files: usize, packed: bool) -> String {
    let _ = std::fs::remove_dir_all(dir);
    std::fs::create_dir_all(dir).unwrap();
    git(dir, &["init", "-q"]);
    for i in 0..files {
        let d = dir.join(format!("d{:03}/e{:02}", i % 200, (i / 200) % 10));
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(
            d.join(format!("f{i}.txt")),
            format!("file {i}\n").repeat(40),
        )
        .unwrap();
    }
    git(dir, &["add", "-A"]);
    git(dir, &["commit", "-qm", "base"]);
    if packed {
        git(dir, &["gc", "-q", "--aggressive"]);
    }
    git(dir, &["rev-parse", "HEAD^{tree}"]).trim().to_owned()
}

fn corral_read(objects: &Path, tree: &str) -> (usize, u64) {
    let sb = GitSandbox::new(
        PathBuf::from("/usr/bin/git"),
        objects,
        ObjectFormat::Sha1,
        None,
        Instant::now() + Duration::from_secs(600),
        1 << 30,
    )
    .unwrap();
    let mut cat = sb.cat_file(ObjectFormat::Sha1).unwrap();
    let (mut n, mut bytes) = (0usize, 0u64);
    let mut trees = vec![Oid::from_hex(tree).unwrap()];
    while let Some(t) = trees.pop() {
        let entries = cat.read_tree(&t).unwrap();
        let mut blobs = vec![];
        for (_, e) in entries {
            if e.mode == MODE_TREE {
                trees.push(e.oid);
            } else {
                blobs.push(e.oid);
            }
        }
        for chunk in blobs.chunks(500) {
            for o in chunk {
                cat.send(o).unwrap();
            }
            cat.flush().unwrap();
            for o in chunk {
                let (_, data) = cat.recv(o).unwrap().unwrap();
                n += 1;
                bytes += data.len() as u64;
            }
        }
    }
    (n, bytes)
}

fn gix_read(objects: &Path, tree: &str) -> (usize, u64) {
    use gix_object::Find;
    let odb = gix_odb::at(objects, gix_hash::Kind::Sha1).unwrap();
    let (mut n, mut bytes) = (0usize, 0u64);
    let mut buf = Vec::new();
    let mut blob = Vec::new();
    let mut trees = vec![gix_hash::ObjectId::from_hex(tree.as_bytes()).unwrap()];
    while let Some(t) = trees.pop() {
        let data = odb.try_find(&t, &mut buf).unwrap().unwrap();
        let mut kids = vec![];
        let mut blobs = vec![];
        for e in gix_object::TreeRefIter::from_bytes(data.data, gix_hash::Kind::Sha1) {
            let e = e.unwrap();
            if e.mode.is_tree() {
                kids.push(e.oid.to_owned());
            } else {
                blobs.push(e.oid.to_owned());
            }
        }
        trees.extend(kids);
        for b in blobs {
            let d = odb.try_find(&b, &mut blob).unwrap().unwrap();
            n += 1;
            bytes += d.data.len() as u64;
        }
    }
    (n, bytes)
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn main() {
    let files: usize = std::env::var("FILES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20000);
    for packed in [false, true] {
        let dir = PathBuf::from(format!(
            "/dev/shm/gixcmp-{}",
            if packed { "packed" } else { "loose" }
        ));
        let tree = make_repo(&dir, files, packed);
        let objects = dir.join(".git/objects");
        let (a, b) = (corral_read(&objects, &tree), gix_read(&objects, &tree));
        assert_eq!(a, b, "both read the same blobs");
        let (mut tc, mut tg) = (vec![], vec![]);
        for _ in 0..7 {
            let t = Instant::now();
            corral_read(&objects, &tree);
            tc.push(t.elapsed());
            let t = Instant::now();
            gix_read(&objects, &tree);
            tg.push(t.elapsed());
        }
        let (c, g) = (median(tc), median(tg));
        println!(
            "{} objects: {} blobs, {} bytes: cat-file session {:?}, gix-odb {:?}, ratio gix/corral {:.2}",
            if packed { "packed" } else { "loose" },
            a.0,
            a.1,
            c,
            g,
            g.as_secs_f64() / c.as_secs_f64()
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
