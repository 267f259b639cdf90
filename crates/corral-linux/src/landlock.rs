//! Landlock as the second file-system layer (ADR-0010): read and execute everywhere in the
//! sandbox root, write only beneath the writable workspace prefixes, `/tmp`, `HOME` and
//! `/dev/shm`; abstract-unix-socket and signal scoping from ABI 6. The ruleset is built in
//! the sandbox's init after `pivot_root` and applied by the worker just before `execve`.

/// `LANDLOCK_ACCESS_FS_EXECUTE`: execute a file.
pub const ACCESS_FS_EXECUTE: u64 = 1 << 0;
/// `LANDLOCK_ACCESS_FS_WRITE_FILE`: open a file for writing.
pub const ACCESS_FS_WRITE_FILE: u64 = 1 << 1;
/// `LANDLOCK_ACCESS_FS_READ_FILE`: open a file for reading.
pub const ACCESS_FS_READ_FILE: u64 = 1 << 2;
/// `LANDLOCK_ACCESS_FS_READ_DIR`: list a directory.
pub const ACCESS_FS_READ_DIR: u64 = 1 << 3;
/// `LANDLOCK_ACCESS_FS_REMOVE_DIR`: remove an empty directory or rename one.
pub const ACCESS_FS_REMOVE_DIR: u64 = 1 << 4;
/// `LANDLOCK_ACCESS_FS_REMOVE_FILE`: unlink or rename a file.
pub const ACCESS_FS_REMOVE_FILE: u64 = 1 << 5;
/// `LANDLOCK_ACCESS_FS_MAKE_CHAR`: create a character device.
pub const ACCESS_FS_MAKE_CHAR: u64 = 1 << 6;
/// `LANDLOCK_ACCESS_FS_MAKE_DIR`: create a directory.
pub const ACCESS_FS_MAKE_DIR: u64 = 1 << 7;
/// `LANDLOCK_ACCESS_FS_MAKE_REG`: create a regular file.
pub const ACCESS_FS_MAKE_REG: u64 = 1 << 8;
/// `LANDLOCK_ACCESS_FS_MAKE_SOCK`: create a unix domain socket.
pub const ACCESS_FS_MAKE_SOCK: u64 = 1 << 9;
/// `LANDLOCK_ACCESS_FS_MAKE_FIFO`: create a named pipe.
pub const ACCESS_FS_MAKE_FIFO: u64 = 1 << 10;
/// `LANDLOCK_ACCESS_FS_MAKE_BLOCK`: create a block device.
pub const ACCESS_FS_MAKE_BLOCK: u64 = 1 << 11;
/// `LANDLOCK_ACCESS_FS_MAKE_SYM`: create a symbolic link.
pub const ACCESS_FS_MAKE_SYM: u64 = 1 << 12;
/// `LANDLOCK_ACCESS_FS_REFER`: link or rename a file across directories (ABI 2).
pub const ACCESS_FS_REFER: u64 = 1 << 13;
/// `LANDLOCK_ACCESS_FS_TRUNCATE`: truncate a file (ABI 3).
pub const ACCESS_FS_TRUNCATE: u64 = 1 << 14;
/// `LANDLOCK_ACCESS_FS_IOCTL_DEV`: `ioctl` on a device file (ABI 5).
pub const ACCESS_FS_IOCTL_DEV: u64 = 1 << 15;

/// `LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET`: no connecting to abstract unix sockets created
/// outside the domain (ABI 6).
pub const SCOPE_ABSTRACT_UNIX_SOCKET: u64 = 1 << 0;
/// `LANDLOCK_SCOPE_SIGNAL`: no signals to processes outside the domain (ABI 6).
pub const SCOPE_SIGNAL: u64 = 1 << 1;

/// `LANDLOCK_CREATE_RULESET_VERSION`: ask `landlock_create_ruleset` for the ABI version.
pub const CREATE_RULESET_VERSION: u32 = 1 << 0;
/// `LANDLOCK_RULE_PATH_BENEATH`: the rule type of [`PathBeneathAttr`].
pub const RULE_PATH_BENEATH: u32 = 1;

/// `struct landlock_ruleset_attr` (ABI 6 size; the kernel takes a prefix for older ABIs).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct RulesetAttr {
    /// File-system access rights the ruleset handles (denied unless a rule allows them).
    pub handled_access_fs: u64,
    /// Network access rights the ruleset handles (ABI 4).
    pub handled_access_net: u64,
    /// IPC scopes (`SCOPE_*`, ABI 6).
    pub scoped: u64,
}

/// `struct landlock_path_beneath_attr` (packed).
#[repr(C, packed)]
#[derive(Debug, Clone, Copy)]
pub struct PathBeneathAttr {
    /// Access rights allowed beneath `parent_fd`.
    pub allowed_access: u64,
    /// An `O_PATH` (or open) descriptor of the directory or file the rule is for.
    pub parent_fd: i32,
}

/// Every file-system access right the given ABI knows.
#[must_use]
pub fn handled_fs(abi: u32) -> u64 {
    let mut all = (1 << 13) - 1; // ABI 1: EXECUTE..MAKE_SYM
    if abi >= 2 {
        all |= ACCESS_FS_REFER;
    }
    if abi >= 3 {
        all |= ACCESS_FS_TRUNCATE;
    }
    if abi >= 5 {
        all |= ACCESS_FS_IOCTL_DEV;
    }
    all
}

/// Scopes the given ABI supports.
#[must_use]
pub fn scopes(abi: u32) -> u64 {
    if abi >= 6 {
        SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL
    } else {
        0
    }
}

/// Rights that apply to regular files (a rule on a file may only hold these).
#[must_use]
pub fn file_rights(abi: u32) -> u64 {
    handled_fs(abi)
        & (ACCESS_FS_EXECUTE
            | ACCESS_FS_WRITE_FILE
            | ACCESS_FS_READ_FILE
            | ACCESS_FS_TRUNCATE
            | ACCESS_FS_IOCTL_DEV)
}

/// Read-only rights for the whole sandbox root.
#[must_use]
pub fn read_rights(abi: u32) -> u64 {
    handled_fs(abi) & (ACCESS_FS_EXECUTE | ACCESS_FS_READ_FILE | ACCESS_FS_READ_DIR)
}

/// Size of `landlock_ruleset_attr` to pass for an ABI.
#[must_use]
pub fn attr_size(abi: u32) -> usize {
    match abi {
        0..=3 => 8,
        4 | 5 => 16,
        _ => 24,
    }
}
