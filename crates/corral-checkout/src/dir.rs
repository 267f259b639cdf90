//! Writes beneath an open directory fd, and nowhere else.
//!
//! Every entry is created relative to the fd of its parent directory, under a name that
//! [`crate::validate::check_entries`] proved to be one path component. Files are created with
//! `O_CREAT | O_EXCL | O_NOFOLLOW` (an existing name, a symlink included, fails with `EEXIST`
//! instead of being followed), directories are re-opened with `openat2(RESOLVE_BENEATH |
//! RESOLVE_NO_SYMLINKS)`, and modes are set on the open fd. A symlink created a moment earlier
//! can therefore never redirect a later write, even if validation had a hole.

use std::io::{self, Write as _};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::Path;

use rustix::fs::{AtFlags, Mode, OFlags, ResolveFlags, Stat};

/// Resolution that never leaves the directory and never follows a symlink (or a magic link).
fn beneath() -> ResolveFlags {
    ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS
}

/// An open directory that entries are written beneath.
#[derive(Debug)]
pub struct Dir {
    fd: OwnedFd,
}

impl Dir {
    /// Opens `path` as a directory; its last component must not be a symlink.
    pub fn open(path: &Path) -> io::Result<Self> {
        let fd = rustix::fs::open(
            path,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        )?;
        Ok(Self { fd })
    }

    /// Takes an already open directory fd.
    #[must_use]
    pub fn from_fd(fd: OwnedFd) -> Self {
        Self { fd }
    }

    /// Opens the existing directory `name` (a relative path of components) beneath this one.
    pub fn open_dir(&self, name: &str) -> io::Result<Self> {
        let fd = rustix::fs::openat2(
            &self.fd,
            name,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
            beneath(),
        )?;
        Ok(Self { fd })
    }

    /// Creates the directory `name` (mode 0755) and opens it.
    pub fn create_dir(&self, name: &str) -> io::Result<Self> {
        rustix::fs::mkdirat(&self.fd, name, Mode::from_raw_mode(0o755))?;
        let dir = self.open_dir(name)?;
        // The umask may have narrowed it.
        rustix::fs::fchmod(&dir.fd, Mode::from_raw_mode(0o755))?;
        Ok(dir)
    }

    /// Creates the new regular file `name` with `data` and `mode`; returns its stat data.
    pub fn create_file(&self, name: &str, data: &[u8], mode: u32) -> io::Result<Stat> {
        let fd = rustix::fs::openat2(
            &self.fd,
            name,
            OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::from_raw_mode(mode),
            beneath(),
        )?;
        let mut file = std::fs::File::from(fd);
        file.write_all(data)?;
        let mut st = rustix::fs::fstat(&file)?;
        // The umask may have narrowed the mode given at creation.
        if st.st_mode & 0o7777 != mode {
            rustix::fs::fchmod(&file, Mode::from_raw_mode(mode))?;
            st = rustix::fs::fstat(&file)?;
        }
        Ok(st)
    }

    /// Creates the new symlink `name` -> `target` (the target is data, never resolved here).
    pub fn create_symlink(&self, name: &str, target: &[u8]) -> io::Result<Stat> {
        let target = <std::ffi::OsStr as std::os::unix::ffi::OsStrExt>::from_bytes(target);
        rustix::fs::symlinkat(target, &self.fd, name)?;
        Ok(rustix::fs::statat(
            &self.fd,
            name,
            AtFlags::SYMLINK_NOFOLLOW,
        )?)
    }

    /// Replaces the file `name` atomically: writes `name.tmp-<pid>` (exclusive), syncs it,
    /// renames it over `name`.
    pub fn replace_file(&self, name: &str, data: &[u8], mode: u32) -> io::Result<()> {
        let tmp = format!(".{name}.tmp-{}", std::process::id());
        let _ = rustix::fs::unlinkat(&self.fd, tmp.as_str(), AtFlags::empty());
        let fd = rustix::fs::openat2(
            &self.fd,
            tmp.as_str(),
            OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::from_raw_mode(mode),
            beneath(),
        )?;
        let mut file = std::fs::File::from(fd);
        file.write_all(data)?;
        rustix::fs::fchmod(&file, Mode::from_raw_mode(mode))?;
        file.sync_all()?;
        rustix::fs::renameat(&self.fd, tmp.as_str(), &self.fd, name)?;
        Ok(())
    }

    /// Reads the regular file `name` beneath this directory, at most `max` bytes: `None` when
    /// it is longer. Anything but a regular file (a symlink included) fails.
    pub fn read_file(&self, name: &str, max: u64) -> io::Result<Option<Vec<u8>>> {
        use std::io::Read as _;
        let fd = rustix::fs::openat2(
            &self.fd,
            name,
            OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC,
            Mode::empty(),
            beneath(),
        )?;
        let st = rustix::fs::fstat(&fd)?;
        if rustix::fs::FileType::from_raw_mode(st.st_mode) != rustix::fs::FileType::RegularFile {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("{name} is not a regular file"),
            ));
        }
        let mut out = Vec::new();
        std::fs::File::from(fd)
            .take(max.saturating_add(1))
            .read_to_end(&mut out)?;
        Ok((out.len() as u64 <= max).then_some(out))
    }

    /// Flushes the directory itself (after a rename into it).
    pub fn sync(&self) -> io::Result<()> {
        Ok(rustix::fs::fsync(&self.fd)?)
    }
}

impl AsFd for Dir {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_symlink_never_redirects_a_later_write() {
        let t = tempfile::tempdir().unwrap();
        let outside = t.path().join("outside");
        std::fs::create_dir(&outside).unwrap();
        std::fs::write(outside.join("victim"), b"host").unwrap();
        let target = t.path().join("target");
        std::fs::create_dir(&target).unwrap();
        let dir = Dir::open(&target).unwrap();
        let victim = outside.join("victim");
        dir.create_symlink("evil", victim.as_os_str().as_encoded_bytes())
            .unwrap();
        // The same name again as a file: refused, the host file untouched.
        let err = dir.create_file("evil", b"pwned", 0o755).unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc_eexist()));
        assert_eq!(std::fs::read(&victim).unwrap(), b"host");
        // A link to a directory, then a name through it: refused.
        dir.create_symlink("d", outside.as_os_str().as_encoded_bytes())
            .unwrap();
        assert!(dir.create_file("d/pwn", b"x", 0o644).is_err());
        assert!(dir.open_dir("d").is_err());
        assert!(dir.open_dir("..").is_err());
        assert!(!outside.join("pwn").exists());
        // Positive control: a path-based write follows the link.
        std::fs::write(target.join("evil"), b"pwned").unwrap();
        assert_eq!(std::fs::read(&victim).unwrap(), b"pwned");
    }

    fn libc_eexist() -> i32 {
        rustix::io::Errno::EXIST.raw_os_error()
    }

    #[test]
    fn modes_are_set_on_the_fd_whatever_the_umask() {
        let t = tempfile::tempdir().unwrap();
        let dir = Dir::open(t.path()).unwrap();
        let st = dir.create_file("x", b"1", 0o755).unwrap();
        assert_eq!(st.st_mode & 0o777, 0o755);
        let sub = dir.create_dir("sub").unwrap();
        sub.replace_file("f", b"one", 0o644).unwrap();
        sub.replace_file("f", b"two", 0o644).unwrap();
        assert_eq!(std::fs::read(t.path().join("sub/f")).unwrap(), b"two");
    }
}
