//! Git object ids, hashing, tree encoding and a pack writer for corral's own temporary
//! object directory.
//!
//! corral computes blob and tree ids itself (SHA-1 or SHA-256, chosen by the length of the base
//! SHA) and writes the candidate's objects into one pack, so that building the candidate tree
//! costs O(change): no index of the whole repository is read or written.

use std::fmt;
use std::fs;
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};

use flate2::Compression;
use sha1::Digest as _;

/// Which hash the repository uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ObjectFormat {
    /// SHA-1 object ids (40 hex digits).
    Sha1,
    /// SHA-256 object ids (64 hex digits).
    Sha256,
}

impl ObjectFormat {
    /// The format whose hex ids have this length.
    #[must_use]
    pub fn from_hex_len(len: usize) -> Option<Self> {
        match len {
            40 => Some(Self::Sha1),
            64 => Some(Self::Sha256),
            _ => None,
        }
    }

    /// Length of an object id in bytes: 20 or 32.
    #[must_use]
    pub fn raw_len(self) -> usize {
        match self {
            Self::Sha1 => 20,
            Self::Sha256 => 32,
        }
    }

    /// The name git uses in `extensions.objectFormat`.
    #[must_use]
    pub fn git_name(self) -> &'static str {
        match self {
            Self::Sha1 => "sha1",
            Self::Sha256 => "sha256",
        }
    }
}

/// A git object id (20 or 32 bytes).
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Oid {
    raw: [u8; 32],
    len: u8,
}

impl Oid {
    /// From raw bytes of length 20 or 32.
    #[must_use]
    pub fn from_raw(bytes: &[u8]) -> Option<Self> {
        if bytes.len() != 20 && bytes.len() != 32 {
            return None;
        }
        let mut raw = [0u8; 32];
        raw[..bytes.len()].copy_from_slice(bytes);
        Some(Self {
            raw,
            len: u8::try_from(bytes.len()).ok()?,
        })
    }

    /// From 40 or 64 lowercase hex digits.
    #[must_use]
    pub fn from_hex(hex: &str) -> Option<Self> {
        let bytes = hex.as_bytes();
        if (bytes.len() != 40 && bytes.len() != 64)
            || !bytes.iter().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
        {
            return None;
        }
        let mut raw = Vec::with_capacity(bytes.len() / 2);
        for pair in bytes.chunks(2) {
            let s = std::str::from_utf8(pair).ok()?;
            raw.push(u8::from_str_radix(s, 16).ok()?);
        }
        Self::from_raw(&raw)
    }

    /// The raw id bytes (20 or 32).
    #[must_use]
    pub fn as_bytes(&self) -> &[u8] {
        &self.raw[..usize::from(self.len)]
    }

    /// The id as lowercase hex, as git prints it.
    #[must_use]
    pub fn hex(&self) -> String {
        self.as_bytes().iter().map(|b| format!("{b:02x}")).collect()
    }
}

impl fmt::Debug for Oid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.hex())
    }
}

impl fmt::Display for Oid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.hex())
    }
}

/// SHA-1 or SHA-256, incremental.
pub(crate) enum Hasher {
    Sha1(sha1::Sha1),
    Sha256(sha2::Sha256),
}

impl Hasher {
    pub(crate) fn new(format: ObjectFormat) -> Self {
        match format {
            ObjectFormat::Sha1 => Self::Sha1(sha1::Sha1::new()),
            ObjectFormat::Sha256 => Self::Sha256(sha2::Sha256::new()),
        }
    }

    pub(crate) fn update(&mut self, bytes: &[u8]) {
        match self {
            Self::Sha1(h) => h.update(bytes),
            Self::Sha256(h) => h.update(bytes),
        }
    }

    pub(crate) fn finish(self) -> Option<Oid> {
        match self {
            Self::Sha1(h) => Oid::from_raw(&h.finalize()),
            Self::Sha256(h) => Oid::from_raw(&h.finalize()),
        }
    }
}

/// The id of an object with this kind and content.
#[must_use]
pub fn object_id(format: ObjectFormat, kind: &str, content: &[u8]) -> Option<Oid> {
    let mut h = Hasher::new(format);
    h.update(format!("{kind} {}\0", content.len()).as_bytes());
    h.update(content);
    h.finish()
}

/// Git tree entry modes corral understands. This one: a regular, non-executable file.
pub const MODE_FILE: u32 = 0o100_644;
/// An executable regular file.
pub const MODE_EXEC: u32 = 0o100_755;
/// A symbolic link (the blob holds its target).
pub const MODE_SYMLINK: u32 = 0o120_000;
/// A directory (a subtree).
pub const MODE_TREE: u32 = 0o040_000;
/// A submodule commit (gitlink).
pub const MODE_GITLINK: u32 = 0o160_000;

/// One tree entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TreeEntry {
    /// The entry's git mode, for example [`MODE_FILE`] or [`MODE_TREE`].
    pub mode: u32,
    /// The id of the entry's object (blob, tree, or commit for a gitlink).
    pub oid: Oid,
}

impl TreeEntry {
    /// Is this entry a directory ([`MODE_TREE`])?
    #[must_use]
    pub fn is_tree(&self) -> bool {
        self.mode == MODE_TREE
    }
    /// Is this entry a submodule commit ([`MODE_GITLINK`])?
    #[must_use]
    pub fn is_gitlink(&self) -> bool {
        self.mode == MODE_GITLINK
    }
    /// Is this entry a symbolic link ([`MODE_SYMLINK`])?
    #[must_use]
    pub fn is_symlink(&self) -> bool {
        self.mode == MODE_SYMLINK
    }
    /// A regular file (100644 or 100755; git also wrote 100664 long ago).
    #[must_use]
    pub fn is_file(&self) -> bool {
        self.mode & 0o170_000 == 0o100_000
    }
}

/// Parses a tree object's content. Entries keep the object's order.
pub fn parse_tree(format: ObjectFormat, data: &[u8]) -> Option<Vec<(Vec<u8>, TreeEntry)>> {
    let raw_len = format.raw_len();
    let mut out = Vec::new();
    let mut rest = data;
    while !rest.is_empty() {
        let space = rest.iter().position(|&b| b == b' ')?;
        let mode_text = std::str::from_utf8(&rest[..space]).ok()?;
        let mode = u32::from_str_radix(mode_text, 8).ok()?;
        rest = &rest[space + 1..];
        let nul = rest.iter().position(|&b| b == 0)?;
        let name = rest[..nul].to_vec();
        rest = &rest[nul + 1..];
        if rest.len() < raw_len {
            return None;
        }
        let oid = Oid::from_raw(&rest[..raw_len])?;
        rest = &rest[raw_len..];
        out.push((name, TreeEntry { mode, oid }));
    }
    Some(out)
}

/// Git's tree order: names compared bytewise, a tree's name as if it ended with `/`.
fn git_tree_cmp(a: &(&[u8], bool), b: &(&[u8], bool)) -> std::cmp::Ordering {
    let ka = a.0.iter().copied().chain(a.1.then_some(b'/'));
    let kb = b.0.iter().copied().chain(b.1.then_some(b'/'));
    ka.cmp(kb)
}

/// Encodes a tree object from entries in any order.
#[must_use]
pub fn encode_tree<'a>(entries: impl IntoIterator<Item = (&'a [u8], TreeEntry)>) -> Vec<u8> {
    let mut list: Vec<(&[u8], TreeEntry)> = entries.into_iter().collect();
    list.sort_by(|a, b| git_tree_cmp(&(a.0, a.1.is_tree()), &(b.0, b.1.is_tree())));
    let mut out = Vec::new();
    for (name, entry) in list {
        out.extend_from_slice(format!("{:o} ", entry.mode).as_bytes());
        out.extend_from_slice(name);
        out.push(0);
        out.extend_from_slice(entry.oid.as_bytes());
    }
    out
}

/// One reusable zlib compressor (miniz_oxide's state is large; allocating it per object
/// dominated the cost of small captures).
struct Deflater {
    c: flate2::Compress,
    out: Vec<u8>,
    /// `Compression::none()`: zlib stored blocks written directly (no compressor state to
    /// reset per object); the running Adler-32 and whether the header went out.
    stored: Option<(u32, u32, bool)>,
}

impl std::fmt::Debug for Deflater {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Deflater")
    }
}

impl Deflater {
    fn new(level: Compression) -> Self {
        Self {
            c: flate2::Compress::new(level, true),
            out: vec![0u8; 64 * 1024],
            stored: (level == Compression::none()).then_some((1, 0, false)),
        }
    }

    /// Compresses `input` into `w`.
    fn feed(&mut self, mut input: &[u8], w: &mut dyn Write) -> io::Result<()> {
        if let Some((a, b, started)) = &mut self.stored {
            if !*started {
                w.write_all(&[0x78, 0x01])?;
                *started = true;
            }
            for block in input.chunks(65_535) {
                // A non-final stored block: BFINAL=0, BTYPE=00, then LEN and its complement.
                let len = u16::try_from(block.len()).map_err(io::Error::other)?;
                w.write_all(&[0x00])?;
                w.write_all(&len.to_le_bytes())?;
                w.write_all(&(!len).to_le_bytes())?;
                w.write_all(block)?;
                for part in block.chunks(5552) {
                    for &byte in part {
                        *a += u32::from(byte);
                        *b += *a;
                    }
                    *a %= 65_521;
                    *b %= 65_521;
                }
            }
            return Ok(());
        }
        while !input.is_empty() {
            let (in0, out0) = (self.c.total_in(), self.c.total_out());
            self.c
                .compress(input, &mut self.out, flate2::FlushCompress::None)
                .map_err(io::Error::other)?;
            let consumed = usize::try_from(self.c.total_in() - in0).map_err(io::Error::other)?;
            let produced = usize::try_from(self.c.total_out() - out0).map_err(io::Error::other)?;
            w.write_all(&self.out[..produced])?;
            input = &input[consumed..];
        }
        Ok(())
    }

    /// Ends the stream into `w` and resets the compressor for the next object.
    fn finish(&mut self, w: &mut dyn Write) -> io::Result<()> {
        if let Some((a, b, started)) = &mut self.stored {
            if !*started {
                w.write_all(&[0x78, 0x01])?;
            }
            // The final, empty stored block, then the Adler-32 of the content.
            w.write_all(&[0x01, 0x00, 0x00, 0xff, 0xff])?;
            w.write_all(&((*b << 16) | *a).to_be_bytes())?;
            self.stored = Some((1, 0, false));
            return Ok(());
        }
        loop {
            let out0 = self.c.total_out();
            let status = self
                .c
                .compress(&[], &mut self.out, flate2::FlushCompress::Finish)
                .map_err(io::Error::other)?;
            let produced = usize::try_from(self.c.total_out() - out0).map_err(io::Error::other)?;
            w.write_all(&self.out[..produced])?;
            if status == flate2::Status::StreamEnd {
                break;
            }
            if produced == 0 {
                return Err(io::Error::other("zlib made no progress"));
            }
        }
        self.c.reset();
        Ok(())
    }
}

/// Counts and CRCs the bytes written through it (one pack entry).
struct EntryWriter<'a> {
    inner: &'a mut io::BufWriter<fs::File>,
    crc: crc32fast::Hasher,
    written: u64,
}

impl Write for EntryWriter<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.crc.update(&buf[..n]);
        self.written += n as u64;
        Ok(n)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

fn pack_type(kind: &str) -> io::Result<u8> {
    match kind {
        "commit" => Ok(1),
        "tree" => Ok(2),
        "blob" => Ok(3),
        "tag" => Ok(4),
        _ => Err(io::Error::other("unknown object kind")),
    }
}

fn pack_entry_header(kind: u8, mut size: u64) -> Vec<u8> {
    let mut out = Vec::with_capacity(10);
    // The low four bits of the size share the first byte with the type.
    let mut c = (kind << 4) | u8::try_from(size & 0x0f).unwrap_or(0);
    size >>= 4;
    while size != 0 {
        out.push(c | 0x80);
        c = u8::try_from(size & 0x7f).unwrap_or(0);
        size >>= 7;
    }
    out.push(c);
    out
}

/// Writes the candidate's objects into ONE pack (plus its `.idx`) in corral's own object
/// directory: two files per capture instead of two per object, so the cost does not depend on
/// how slowly the scratch filesystem creates files.
#[derive(Debug)]
pub struct PackWriter {
    pack_dir: PathBuf,
    format: ObjectFormat,
    body_path: PathBuf,
    body: Option<io::BufWriter<fs::File>>,
    /// Offset in the final pack of the next entry (the 12-byte header comes first).
    offset: u64,
    entries: Vec<(Oid, u32, u64)>,
    seen: std::collections::HashSet<Oid>,
    deflater: Deflater,
    buf: Vec<u8>,
}

impl PackWriter {
    /// A writer for `<objects>/pack/`.
    pub fn new(objects: &Path, format: ObjectFormat) -> io::Result<Self> {
        Self::with_compression(objects, format, Compression::fast())
    }

    /// A writer whose objects are compressed at `level` (`Compression::none()` stores them:
    /// a base checkout's pack trades disk for the time a cold first attempt waits).
    pub fn with_compression(
        objects: &Path,
        format: ObjectFormat,
        level: Compression,
    ) -> io::Result<Self> {
        let pack_dir = objects.join("pack");
        fs::create_dir_all(&pack_dir)?;
        let body_path = pack_dir.join("tmp_pack_body");
        let body = io::BufWriter::with_capacity(256 * 1024, fs::File::create(&body_path)?);
        Ok(Self {
            pack_dir,
            format,
            body_path,
            body: Some(body),
            offset: 12,
            entries: Vec::new(),
            seen: std::collections::HashSet::new(),
            deflater: Deflater::new(level),
            buf: vec![0u8; 64 * 1024],
        })
    }

    /// Drops the entry just written (a duplicate, or a failed read).
    fn rollback(&mut self, start: u64) -> io::Result<()> {
        self.deflater.c.reset();
        if self.deflater.stored.is_some() {
            self.deflater.stored = Some((1, 0, false));
        }
        let body = self
            .body
            .as_mut()
            .ok_or_else(|| io::Error::other("pack already finished"))?;
        body.flush()?;
        let file = body.get_mut();
        file.set_len(start - 12)?;
        std::io::Seek::seek(file, io::SeekFrom::Start(start - 12))?;
        self.offset = start;
        Ok(())
    }

    /// Accounts for an entry just written at `start` (`n` bytes).
    fn record(&mut self, oid: Oid, crc: u32, start: u64, n: u64) {
        self.offset += n;
        self.entries.push((oid, crc, start));
        self.seen.insert(oid);
    }

    /// Writes an object held in memory; returns its id.
    pub fn write(&mut self, kind: &str, content: &[u8]) -> io::Result<Oid> {
        let oid =
            object_id(self.format, kind, content).ok_or_else(|| io::Error::other("hash length"))?;
        if self.seen.contains(&oid) {
            return Ok(oid);
        }
        let header = pack_entry_header(pack_type(kind)?, content.len() as u64);
        let start = self.offset;
        let body = self
            .body
            .as_mut()
            .ok_or_else(|| io::Error::other("pack already finished"))?;
        let deflater = &mut self.deflater;
        let result = (|| {
            let mut w = EntryWriter {
                inner: body,
                crc: crc32fast::Hasher::new(),
                written: 0,
            };
            w.write_all(&header)?;
            deflater.feed(content, &mut w)?;
            deflater.finish(&mut w)?;
            Ok::<_, io::Error>((w.crc.finalize(), w.written))
        })();
        match result {
            Ok((crc, n)) => {
                self.record(oid, crc, start, n);
                Ok(oid)
            }
            Err(e) => {
                let _ = self.rollback(start);
                Err(e)
            }
        }
    }

    /// Streams exactly `len` bytes from `reader` into a blob, hashing and compressing in one
    /// pass. Fails if the reader yields fewer or more bytes than `len` (the file changed while
    /// it was read, which means something is still writing to the layer).
    pub fn write_blob_from(&mut self, reader: &mut dyn Read, len: u64) -> io::Result<Oid> {
        let start = self.offset;
        let format = self.format;
        let body = self
            .body
            .as_mut()
            .ok_or_else(|| io::Error::other("pack already finished"))?;
        let deflater = &mut self.deflater;
        let buf = &mut self.buf;
        let result = (|| {
            let mut hasher = Hasher::new(format);
            hasher.update(format!("blob {len}\0").as_bytes());
            let mut w = EntryWriter {
                inner: body,
                crc: crc32fast::Hasher::new(),
                written: 0,
            };
            w.write_all(&pack_entry_header(3, len))?;
            let mut remaining = len;
            while remaining > 0 {
                let want = usize::try_from(remaining.min(buf.len() as u64)).unwrap_or(buf.len());
                let n = reader.read(&mut buf[..want])?;
                if n == 0 {
                    return Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "file shrank while it was read",
                    ));
                }
                hasher.update(&buf[..n]);
                deflater.feed(&buf[..n], &mut w)?;
                remaining -= n as u64;
            }
            if reader.read(&mut buf[..1])? != 0 {
                return Err(io::Error::other("file grew while it was read"));
            }
            deflater.finish(&mut w)?;
            let oid = hasher
                .finish()
                .ok_or_else(|| io::Error::other("hash length"))?;
            Ok((oid, w.crc.finalize(), w.written))
        })();
        match result {
            Ok((oid, crc, n)) => {
                if self.seen.contains(&oid) {
                    self.rollback(start)?;
                } else {
                    self.record(oid, crc, start, n);
                }
                Ok(oid)
            }
            Err(e) => {
                let _ = self.rollback(start);
                Err(e)
            }
        }
    }

    /// Writes the final `.pack` and `.idx` so git can read the objects.
    pub fn finish(&mut self) -> io::Result<()> {
        let Some(mut body) = self.body.take() else {
            return Ok(());
        };
        body.flush()?;
        drop(body);
        if self.entries.is_empty() {
            return fs::remove_file(&self.body_path);
        }
        let count = u32::try_from(self.entries.len()).map_err(io::Error::other)?;
        // The pack: header, body, trailing hash of everything before.
        let tmp_pack = self.pack_dir.join("tmp_pack");
        let mut hasher = Hasher::new(self.format);
        {
            let mut out = io::BufWriter::with_capacity(256 * 1024, fs::File::create(&tmp_pack)?);
            let mut header = Vec::with_capacity(12);
            header.extend_from_slice(b"PACK");
            header.extend_from_slice(&2u32.to_be_bytes());
            header.extend_from_slice(&count.to_be_bytes());
            hasher.update(&header);
            out.write_all(&header)?;
            let mut body = fs::File::open(&self.body_path)?;
            loop {
                let n = body.read(&mut self.buf)?;
                if n == 0 {
                    break;
                }
                hasher.update(&self.buf[..n]);
                out.write_all(&self.buf[..n])?;
            }
            let pack_sum = std::mem::replace(&mut hasher, Hasher::new(self.format))
                .finish()
                .ok_or_else(|| io::Error::other("hash length"))?;
            out.write_all(pack_sum.as_bytes())?;
            out.flush()?;
            fs::remove_file(&self.body_path)?;

            // The index (version 2).
            self.entries.sort_by_key(|e| e.0);
            let mut idx =
                Vec::with_capacity(1072 + self.entries.len() * (self.format.raw_len() + 12));
            idx.extend_from_slice(b"\xfftOc");
            idx.extend_from_slice(&2u32.to_be_bytes());
            let mut fanout = [0u32; 256];
            for (oid, _, _) in &self.entries {
                fanout[usize::from(oid.as_bytes()[0])] += 1;
            }
            let mut acc = 0u32;
            for f in &mut fanout {
                acc += *f;
                *f = acc;
            }
            for f in fanout {
                idx.extend_from_slice(&f.to_be_bytes());
            }
            for (oid, _, _) in &self.entries {
                idx.extend_from_slice(oid.as_bytes());
            }
            for (_, crc, _) in &self.entries {
                idx.extend_from_slice(&crc.to_be_bytes());
            }
            let mut large: Vec<u64> = Vec::new();
            for (_, _, off) in &self.entries {
                if *off < 0x8000_0000 {
                    idx.extend_from_slice(
                        &u32::try_from(*off).map_err(io::Error::other)?.to_be_bytes(),
                    );
                } else {
                    let i = u32::try_from(large.len()).map_err(io::Error::other)?;
                    idx.extend_from_slice(&(0x8000_0000 | i).to_be_bytes());
                    large.push(*off);
                }
            }
            for off in large {
                idx.extend_from_slice(&off.to_be_bytes());
            }
            idx.extend_from_slice(pack_sum.as_bytes());
            let idx_sum = object_hash(self.format, &idx)?;
            idx.extend_from_slice(idx_sum.as_bytes());
            let name = format!("pack-{}", pack_sum.hex());
            fs::rename(&tmp_pack, self.pack_dir.join(format!("{name}.pack")))?;
            let tmp_idx = self.pack_dir.join("tmp_idx");
            fs::write(&tmp_idx, &idx)?;
            fs::rename(&tmp_idx, self.pack_dir.join(format!("{name}.idx")))?;
        }
        Ok(())
    }
}

/// The plain hash of bytes (pack and index trailers).
fn object_hash(format: ObjectFormat, bytes: &[u8]) -> io::Result<Oid> {
    let mut h = Hasher::new(format);
    h.update(bytes);
    h.finish().ok_or_else(|| io::Error::other("hash length"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_ids() {
        assert_eq!(
            object_id(ObjectFormat::Sha1, "blob", b"").map(|o| o.hex()),
            Some("e69de29bb2d1d6434b8b29ae775ad8c2e48c5391".to_owned())
        );
        assert_eq!(
            object_id(ObjectFormat::Sha1, "tree", b"").map(|o| o.hex()),
            Some("4b825dc642cb6eb9a060e54bf8d69288fbee4904".to_owned())
        );
        assert_eq!(
            object_id(ObjectFormat::Sha256, "tree", b"").map(|o| o.hex()),
            Some("6ef19b41225c5369f1c104d45d8d85efa9b057b53b14b4b9b939dd74decc5321".to_owned())
        );
    }

    #[test]
    fn tree_order_puts_dirs_after_dash() {
        let oid = object_id(ObjectFormat::Sha1, "blob", b"x").unwrap();
        let f = TreeEntry {
            mode: MODE_FILE,
            oid,
        };
        let t = TreeEntry {
            mode: MODE_TREE,
            oid,
        };
        let enc = encode_tree([(&b"a"[..], t), (&b"a-b"[..], f), (&b"a.c"[..], f)]);
        let parsed = parse_tree(ObjectFormat::Sha1, &enc).unwrap();
        let names: Vec<&[u8]> = parsed.iter().map(|(n, _)| n.as_slice()).collect();
        assert_eq!(names, vec![&b"a-b"[..], b"a.c", b"a"]);
    }

    fn git_in(dir: &Path, args: &[&str]) -> std::process::Output {
        std::process::Command::new("git")
            .env_clear()
            .env("PATH", "/usr/bin:/bin")
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("HOME", dir)
            .env("GIT_DIR", dir)
            .args(args)
            .output()
            .unwrap()
    }

    #[test]
    fn pack_is_valid_for_git() {
        for (format, name) in [
            (ObjectFormat::Sha1, "sha1"),
            (ObjectFormat::Sha256, "sha256"),
        ] {
            let tmp = tempfile::tempdir().unwrap();
            let gd = tmp.path().join("g");
            let out = std::process::Command::new("git")
                .args(["init", "-q", "--bare", &format!("--object-format={name}")])
                .arg(&gd)
                .env("GIT_CONFIG_GLOBAL", "/dev/null")
                .output()
                .unwrap();
            assert!(out.status.success());
            let mut w = PackWriter::new(&gd.join("objects"), format).unwrap();
            let a = w.write("blob", b"hello\n").unwrap();
            assert_eq!(w.write("blob", b"hello\n").unwrap(), a);
            // A failed streaming read is rolled back.
            let mut short: &[u8] = b"abc";
            assert!(w.write_blob_from(&mut short, 10).is_err());
            let big: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect();
            let b = w
                .write_blob_from(&mut big.as_slice(), big.len() as u64)
                .unwrap();
            // A duplicate streamed blob is rolled back too.
            assert_eq!(
                w.write_blob_from(&mut big.as_slice(), big.len() as u64)
                    .unwrap(),
                b
            );
            let t = w
                .write(
                    "tree",
                    &encode_tree([
                        (
                            &b"a"[..],
                            TreeEntry {
                                mode: MODE_FILE,
                                oid: a,
                            },
                        ),
                        (
                            &b"b"[..],
                            TreeEntry {
                                mode: MODE_EXEC,
                                oid: b,
                            },
                        ),
                    ]),
                )
                .unwrap();
            w.finish().unwrap();
            let packs: Vec<_> = fs::read_dir(gd.join("objects/pack"))
                .unwrap()
                .map(|e| e.unwrap().path())
                .filter(|p| p.extension().is_some_and(|x| x == "idx"))
                .collect();
            assert_eq!(packs.len(), 1);
            let v = git_in(&gd, &["verify-pack", "-v", packs[0].to_str().unwrap()]);
            assert!(v.status.success(), "{}", String::from_utf8_lossy(&v.stderr));
            assert!(String::from_utf8_lossy(&v.stdout).contains("non delta: 3 objects"));
            let c = git_in(&gd, &["cat-file", "-p", &b.hex()]);
            assert_eq!(c.stdout, big);
            let ls = git_in(&gd, &["ls-tree", &t.hex()]);
            assert!(String::from_utf8_lossy(&ls.stdout).contains("100755 blob"));
            let fsck = git_in(&gd, &["fsck", "--strict"]);
            assert!(
                fsck.status.success(),
                "{}",
                String::from_utf8_lossy(&fsck.stderr)
            );
        }
    }
}
