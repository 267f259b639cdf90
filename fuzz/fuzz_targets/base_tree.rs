//! Arbitrary tree objects through the base-tree validator and the materializer, into a
//! scratch directory. Property: nothing is ever created, changed or chmodded outside it,
//! whatever the trees say (names with `/`, `..`, duplicates, symlinks to the outside first).
#![no_main]

use std::collections::HashMap;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::{Duration, Instant};

use corral_capture::objects::{ObjectFormat, Oid, object_id};
use corral_checkout::Limits;
use corral_checkout::materialize::{ObjectSource, materialize_commit};
use libfuzzer_sys::fuzz_target;

struct Map(HashMap<Oid, (String, Vec<u8>)>);

impl ObjectSource for Map {
    fn request(&mut self, _: &Oid) -> Result<(), String> {
        Ok(())
    }
    fn flush(&mut self) -> Result<(), String> {
        Ok(())
    }
    fn answer(&mut self, oid: &Oid) -> Result<Option<(String, Vec<u8>)>, String> {
        Ok(self.0.get(oid).cloned())
    }
}

fn put(map: &mut Map, kind: &str, data: Vec<u8>) -> Oid {
    let oid = object_id(ObjectFormat::Sha1, kind, &data).expect("sha1");
    map.0.insert(oid, (kind.to_owned(), data));
    oid
}

fuzz_target!(|data: &[u8]| {
    let scratch = tempfile::tempdir().expect("tempdir");
    let outside = scratch.path().join("outside");
    std::fs::create_dir(&outside).expect("outside");
    let canary = outside.join("canary");
    std::fs::write(&canary, b"host").expect("canary");
    std::fs::set_permissions(&canary, std::fs::Permissions::from_mode(0o600)).expect("mode");
    let target = scratch.path().join("target");
    std::fs::create_dir(&target).expect("target");

    // Blobs the trees may name: content, and symlink targets aimed outside.
    let mut map = Map(HashMap::new());
    let blobs = [
        put(&mut map, "blob", b"pwned".to_vec()),
        put(&mut map, "blob", canary.as_os_str().as_encoded_bytes().to_vec()),
        put(&mut map, "blob", outside.as_os_str().as_encoded_bytes().to_vec()),
        put(&mut map, "blob", b"../outside".to_vec()),
        put(&mut map, "blob", b"../../outside/canary".to_vec()),
    ];
    // The input: trees separated by 0xff; in each, entries are `mode-selector name 0x00
    // object-selector`; an object selector names a blob or an earlier tree.
    let modes = [0o100_644u32, 0o100_755, 0o120_000, 0o040_000, 0o160_000, 0o100_664, 0o777];
    let mut trees: Vec<Oid> = Vec::new();
    for chunk in data.split(|b| *b == 0xff).take(16) {
        let mut raw = Vec::new();
        let mut rest = chunk;
        while let Some((&m, tail)) = rest.split_first() {
            let Some(nul) = tail.iter().position(|b| *b == 0) else { break };
            let name = &tail[..nul];
            let Some(&sel) = tail.get(nul + 1) else { break };
            rest = &tail[nul + 2..];
            let mode = modes[usize::from(m) % modes.len()];
            let all: Vec<Oid> = blobs.iter().chain(trees.iter()).copied().collect();
            let oid = all[usize::from(sel) % all.len()];
            raw.extend_from_slice(format!("{mode:o} ").as_bytes());
            raw.extend_from_slice(name);
            raw.push(0);
            raw.extend_from_slice(oid.as_bytes());
        }
        let t = put(&mut map, "tree", raw);
        trees.push(t);
    }
    let Some(root) = trees.last().copied() else { return };
    let commit = put(
        &mut map,
        "commit",
        format!("tree {}\nauthor a <a> 0 +0000\ncommitter a <a> 0 +0000\n\nm\n", root.hex())
            .into_bytes(),
    );
    let _ = materialize_commit(
        &mut map,
        ObjectFormat::Sha1,
        &commit,
        &target,
        Limits {
            max_entries: 2_000,
            max_bytes: 1 << 20,
        },
        Instant::now() + Duration::from_secs(10),
    );

    // The property: outside the target, the scratch directory is exactly as it was.
    assert_eq!(std::fs::read(&canary).expect("canary read"), b"host", "canary written");
    let mode = std::fs::metadata(&canary).expect("canary").permissions().mode() & 0o7777;
    assert_eq!(mode, 0o600, "canary chmodded");
    let names = |p: &Path| -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(p)
            .expect("read_dir")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    };
    assert_eq!(names(&outside), vec!["canary"], "created outside");
    assert_eq!(names(scratch.path()), vec!["outside", "target"], "created beside");
});
