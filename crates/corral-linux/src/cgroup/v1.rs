//! One run's group on cgroup v1: one directory per controller (`memory`, `pids`, `cpu`,
//! `cpuacct`, `freezer`); killing freezes, kills and thaws.

use std::fs;
use std::io::{self};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::*;

/// A cgroup v1 group: one directory per controller.
#[derive(Debug)]
pub struct V1Group {
    pub(super) dirs: Vec<(String, PathBuf)>,
    pub(super) removed: bool,
}

impl V1Group {
    fn dir(&self, ctrl: &str) -> io::Result<&Path> {
        self.dirs
            .iter()
            .find(|(c, _)| c == ctrl)
            .map(|(_, d)| d.as_path())
            .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, format!("v1 controller {ctrl}")))
    }

    pub(super) fn apply(&self, l: &CgroupLimits) -> io::Result<()> {
        let mem = self.dir("memory")?;
        write_file(
            &mem.join("memory.limit_in_bytes"),
            &l.memory_bytes.to_string(),
        )?;
        // memsw exists only with swap accounting; without it, the host must have no swap
        // (the probe checks and says so).
        let memsw = mem.join("memory.memsw.limit_in_bytes");
        if memsw.exists() {
            write_file(&memsw, &l.memory_bytes.to_string())?;
        }
        let _ = write_file(&mem.join("memory.swappiness"), "0");
        write_file(&self.dir("pids")?.join("pids.max"), &l.pids_max.to_string())?;
        let cpu = self.dir("cpu")?;
        write_file(&cpu.join("cpu.cfs_period_us"), &l.cpu_period_us.to_string())?;
        write_file(&cpu.join("cpu.cfs_quota_us"), &l.cpu_quota_us.to_string())?;
        Ok(())
    }

    fn procs(&self) -> io::Result<Vec<i32>> {
        let mut all = Vec::new();
        for (_, d) in &self.dirs {
            match fs::read_to_string(d.join("cgroup.procs")) {
                Ok(s) => all.extend(s.lines().filter_map(|l| l.trim().parse::<i32>().ok())),
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(e),
            }
        }
        all.sort_unstable();
        all.dedup();
        Ok(all)
    }
}

impl CgroupOps for V1Group {
    fn attach(&self, pid: i32) -> io::Result<()> {
        let pid = pid.to_string();
        for (_, d) in &self.dirs {
            write_file(&d.join("cgroup.procs"), &pid)?;
        }
        Ok(())
    }
    fn cpu_usage_usec(&self) -> io::Result<u64> {
        Ok(read_u64(&self.dir("cpuacct")?.join("cpuacct.usage"))? / 1000)
    }
    fn memory_peak_bytes(&self) -> io::Result<u64> {
        read_u64(&self.dir("memory")?.join("memory.max_usage_in_bytes"))
    }
    fn oom_kills(&self) -> io::Result<u64> {
        let mem = self.dir("memory")?;
        let kills = keyed(&mem.join("memory.oom_control"), "oom_kill")?;
        Ok(kills)
    }
    fn kill_all(&self) -> io::Result<()> {
        // Freeze so nothing forks between listing and killing, kill every task, thaw so the
        // SIGKILLs are delivered.
        let freezer = self.dir("freezer")?.join("freezer.state");
        write_file(&freezer, "FROZEN")?;
        let deadline = Instant::now() + Duration::from_millis(500);
        while fs::read_to_string(&freezer)?.trim() != "FROZEN" && Instant::now() < deadline {
            std::thread::sleep(Duration::from_micros(200));
        }
        for pid in self.procs()? {
            // SAFETY: kill(2) only sends a signal; the pid was listed in our own group.
            #[allow(unsafe_code, reason = "kill(2) has no std wrapper")]
            unsafe {
                libc::kill(pid, libc::SIGKILL);
            }
        }
        write_file(&freezer, "THAWED")
    }
    fn end_now(&self) -> io::Result<()> {
        // No freeze: tasks throttled at their quota may not reach the freezer in time. A task
        // forked after the listing dies with the PID namespace (init is killed next).
        for pid in self.procs()? {
            // SAFETY: kill(2) only sends a signal; the pid was listed in our own group.
            #[allow(unsafe_code, reason = "kill(2) has no std wrapper")]
            unsafe {
                libc::kill(pid, libc::SIGKILL);
            }
        }
        write_file(&self.dir("cpu")?.join("cpu.cfs_quota_us"), "-1")
    }
    fn populated(&self) -> io::Result<bool> {
        Ok(!self.procs()?.is_empty())
    }
    fn destroy(&mut self) -> io::Result<()> {
        if self.removed {
            return Ok(());
        }
        if self.dirs.iter().any(|(_, d)| d.exists()) {
            if self.populated().unwrap_or(true) {
                let _ = self.kill_all();
            }
            wait_empty(self)?;
            // Remove every controller directory even if one fails; report the first error.
            let mut first = None;
            for (_, d) in &self.dirs {
                if let Err(e) = rmdir_retry(d) {
                    first.get_or_insert(e);
                }
            }
            if let Some(e) = first {
                return Err(e);
            }
        }
        self.removed = true;
        Ok(())
    }
    fn dirs(&self) -> Vec<PathBuf> {
        self.dirs.iter().map(|(_, d)| d.clone()).collect()
    }
}
