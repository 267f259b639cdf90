//! Landlock as the second file-system layer (ADR-0010): read and execute everywhere in the
//! sandbox root, write only beneath the writable workspace prefixes, `/tmp`, `HOME` and
//! `/dev/shm`; abstract-unix-socket and signal scoping from ABI 6. The ruleset is built in
//! the sandbox's init after `pivot_root` and applied by the worker just before `execve`.

pub const ACCESS_FS_EXECUTE: u64 = 1 << 0;
pub const ACCESS_FS_WRITE_FILE: u64 = 1 << 1;
pub const ACCESS_FS_READ_FILE: u64 = 1 << 2;
pub const ACCESS_FS_READ_DIR: u64 = 1 << 3;
pub const ACCESS_FS_REMOVE_DIR: u64 = 1 << 4;
pub const ACCESS_FS_REMOVE_FILE: u64 = 1 << 5;
pub const ACCESS_FS_MAKE_CHAR: u64 = 1 << 6;
pub const ACCESS_FS_MAKE_DIR: u64 = 1 << 7;
pub const ACCESS_FS_MAKE_REG: u64 = 1 << 8;
pub const ACCESS_FS_MAKE_SOCK: u64 = 1 << 9;
pub const ACCESS_FS_MAKE_FIFO: u64 = 1 << 10;
pub const ACCESS_FS_MAKE_BLOCK: u64 = 1 << 11;
pub const ACCESS_FS_MAKE_SYM: u64 = 1 << 12;
pub const ACCESS_FS_REFER: u64 = 1 << 13;
pub const ACCESS_FS_TRUNCATE: u64 = 1 << 14;
pub const ACCESS_FS_IOCTL_DEV: u64 = 1 << 15;

pub const SCOPE_ABSTRACT_UNIX_SOCKET: u64 = 1 << 0;
pub const SCOPE_SIGNAL: u64 = 1 << 1;

pub const CREATE_RULESET_VERSION: u32 = 1 << 0;
pub const RULE_PATH_BENEATH: u32 = 1;

/// `struct landlock_ruleset_attr` (ABI 6 size; the kernel takes a prefix for older ABIs).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct RulesetAttr {
    pub handled_access_fs: u64,
    pub handled_access_net: u64,
    pub scoped: u64,
}

/// `struct landlock_path_beneath_attr` (packed).
#[repr(C, packed)]
#[derive(Debug, Clone, Copy)]
pub struct PathBeneathAttr {
    pub allowed_access: u64,
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
