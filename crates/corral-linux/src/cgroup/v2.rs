//! One run's group on cgroup v2: a single directory with `cpu`, `memory` and `pids`.

use std::io::{self};
use std::path::PathBuf;

use super::*;

/// A cgroup v2 group.
#[derive(Debug)]
pub struct V2Group {
    pub(super) dir: PathBuf,
    pub(super) removed: bool,
}

impl V2Group {
    pub(super) fn apply(&self, l: &CgroupLimits) -> io::Result<()> {
        write_file(&self.dir.join("memory.max"), &l.memory_bytes.to_string())?;
        // No swap escape; absent when the kernel has no swap support (then there is none).
        match write_file(&self.dir.join("memory.swap.max"), "0") {
            Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
            _ => {}
        }
        let _ = write_file(&self.dir.join("memory.oom.group"), "1");
        write_file(&self.dir.join("pids.max"), &l.pids_max.to_string())?;
        write_file(
            &self.dir.join("cpu.max"),
            &format!("{} {}", l.cpu_quota_us, l.cpu_period_us),
        )?;
        Ok(())
    }
}

impl CgroupOps for V2Group {
    fn attach(&self, pid: i32) -> io::Result<()> {
        write_file(&self.dir.join("cgroup.procs"), &pid.to_string())
    }
    fn cpu_usage_usec(&self) -> io::Result<u64> {
        keyed(&self.dir.join("cpu.stat"), "usage_usec")
    }
    fn memory_peak_bytes(&self) -> io::Result<u64> {
        read_u64(&self.dir.join("memory.peak"))
            .or_else(|_| read_u64(&self.dir.join("memory.current")))
    }
    fn oom_kills(&self) -> io::Result<u64> {
        keyed(&self.dir.join("memory.events"), "oom_kill")
    }
    fn kill_all(&self) -> io::Result<()> {
        write_file(&self.dir.join("cgroup.kill"), "1")
    }
    fn end_now(&self) -> io::Result<()> {
        self.kill_all()?;
        write_file(&self.dir.join("cpu.max"), "max")
    }
    fn populated(&self) -> io::Result<bool> {
        match keyed(&self.dir.join("cgroup.events"), "populated") {
            Ok(n) => Ok(n != 0),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(e),
        }
    }
    fn destroy(&mut self) -> io::Result<()> {
        if self.removed {
            return Ok(());
        }
        if self.dir.exists() {
            if self.populated().unwrap_or(true) {
                let _ = self.kill_all();
            }
            wait_empty(self)?;
            rmdir_retry(&self.dir)?;
        }
        self.removed = true;
        Ok(())
    }
    fn dirs(&self) -> Vec<PathBuf> {
        vec![self.dir.clone()]
    }
}
