//! The worker's `.git/index` for a fresh base checkout.

use corral_capture::objects::{ObjectFormat, Oid};
use rustix::fs::Stat;

/// One entry of the worker's `.git/index`.
pub(crate) struct IndexEntry {
    pub path: String,
    pub mode: u32,
    pub oid: Oid,
    /// Stat data of the written file (`None` for a submodule).
    pub meta: Option<Stat>,
}

/// Encodes a version 2 index (git's `Documentation/gitformat-index.txt`) of the checkout, so
/// `git status` inside the sandbox sees a clean worktree. Stat data is the checkout's own;
/// where the sandbox shows it differently git simply re-reads the file.
pub(crate) fn encode_index(format: ObjectFormat, mut entries: Vec<IndexEntry>) -> Vec<u8> {
    entries.sort_by(|a, b| a.path.as_bytes().cmp(b.path.as_bytes()));
    let mut out = Vec::new();
    out.extend_from_slice(b"DIRC");
    out.extend_from_slice(&2u32.to_be_bytes());
    out.extend_from_slice(
        &u32::try_from(entries.len())
            .unwrap_or(u32::MAX)
            .to_be_bytes(),
    );
    let low = |v: i64| (v as u64 & 0xffff_ffff) as u32;
    for e in &entries {
        let start = out.len();
        let stat: [u32; 10] = match &e.meta {
            Some(m) => [
                low(m.st_ctime),
                low(m.st_ctime_nsec as i64),
                low(m.st_mtime),
                low(m.st_mtime_nsec as i64),
                (m.st_dev & 0xffff_ffff) as u32,
                (m.st_ino & 0xffff_ffff) as u32,
                e.mode,
                m.st_uid,
                m.st_gid,
                (m.st_size as u64 & 0xffff_ffff) as u32,
            ],
            None => [0, 0, 0, 0, 0, 0, e.mode, 0, 0, 0],
        };
        for v in stat {
            out.extend_from_slice(&v.to_be_bytes());
        }
        out.extend_from_slice(e.oid.as_bytes());
        let flags = u16::try_from(e.path.len().min(0xfff)).unwrap_or(0xfff);
        out.extend_from_slice(&flags.to_be_bytes());
        out.extend_from_slice(e.path.as_bytes());
        // NUL-terminated and padded to a multiple of eight bytes.
        let len = out.len() - start;
        let pad = 8 - (len % 8);
        out.extend(std::iter::repeat_n(0u8, pad));
    }
    let checksum: Vec<u8> = match format {
        ObjectFormat::Sha1 => {
            use sha1::Digest as _;
            sha1::Sha1::digest(&out).to_vec()
        }
        ObjectFormat::Sha256 => {
            use sha2::Digest as _;
            sha2::Sha256::digest(&out).to_vec()
        }
    };
    out.extend_from_slice(&checksum);
    out
}
