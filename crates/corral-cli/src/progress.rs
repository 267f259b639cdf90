//! Live progress on a terminal's stderr while a run is going on: elapsed time and, when the
//! backend can tell, CPU, memory and processes against their ceilings. Never on `--json`
//! runs and never when stderr is not a terminal.

use std::io::Write;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// A background line redrawn every 200 ms; erased when dropped.
#[derive(Debug)]
pub struct Ticker {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Ticker {
    /// Whether a live line suits this stderr: a terminal that can redraw a line (not
    /// `TERM=dumb`, which has no cursor control).
    pub fn wanted(json: bool) -> bool {
        use std::io::IsTerminal as _;
        !json
            && std::io::stderr().is_terminal()
            && std::env::var_os("TERM").is_some_and(|t| !t.is_empty() && t != "dumb")
    }

    pub fn start(budget: &corral_contract::documents::Budget) -> Self {
        let budget = budget.clone();
        let wall_budget = budget.wall_seconds.unwrap_or(0);
        let stop = Arc::new(AtomicBool::new(false));
        let s = Arc::clone(&stop);
        let thread = std::thread::spawn(move || {
            let t0 = Instant::now();
            let mut peak = 0u64;
            while !s.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(200));
                let mut line = format!(
                    "[corral] running {:.1}s / {wall_budget}s",
                    t0.elapsed().as_secs_f64()
                );
                if let Some(u) = corral_linux::live_usage() {
                    // Sampled every 200 ms: the peak seen here, not the kernel's own (the
                    // manifest records that one).
                    peak = peak.max(u.memory_bytes);
                    line.push_str(&format!(
                        "  cpu {:.1}s / {}s  memory {} (peak {}) / {}  processes {} / {}",
                        u.cpu_ms as f64 / 1000.0,
                        budget.cpu_seconds.unwrap_or(0),
                        crate::summary::size(u.memory_bytes),
                        crate::summary::size(peak),
                        crate::summary::size(budget.memory_bytes.unwrap_or(0)),
                        u.processes,
                        budget.max_processes.unwrap_or(0)
                    ));
                }
                let mut err = std::io::stderr().lock();
                let _ = write!(err, "\r\x1b[2K{line}");
                let _ = err.flush();
            }
            let _ = write!(std::io::stderr(), "\r\x1b[2K");
        });
        Self {
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for Ticker {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
