//! The human summary of a run, from its manifest: what `corral demo` prints, `corral run`
//! prints on a terminal, and `corral show` prints for a stored manifest. Every piece of text
//! the worker could influence (paths, details, destinations, logs) is escaped.

use corral_contract::ResultManifest;
use corral_contract::documents::Budget;

use crate::display::{ending, escape, word};

/// Thousandths of a CPU as CPUs: `2`, `1.5`, `0.25`.
fn cpus(millicores: u64) -> String {
    let (whole, frac) = (millicores / 1000, millicores % 1000);
    if frac == 0 {
        whole.to_string()
    } else {
        format!("{whole}.{frac:03}")
            .trim_end_matches('0')
            .to_owned()
    }
}

/// Bytes as a person reads them: `780 KiB`, `12.3 MiB`, `2.0 GiB` (`512 B` below 1 KiB).
#[must_use]
pub fn size(bytes: u64) -> String {
    const KIB: u64 = 1 << 10;
    const MIB: u64 = 1 << 20;
    const GIB: u64 = 1 << 30;
    match bytes {
        b if b >= GIB => format!("{:.1} GiB", b as f64 / GIB as f64),
        b if b >= 10 * MIB => format!("{} MiB", b / MIB),
        b if b >= MIB => format!("{:.1} MiB", b as f64 / MIB as f64),
        b if b >= KIB => format!("{} KiB", b.div_ceil(KIB)),
        b => format!("{b} B"),
    }
}

/// Milliseconds as a person reads them: `23 ms` below a second, `1.4 s` above.
#[must_use]
pub fn duration(ms: u64) -> String {
    if ms < 1000 {
        format!("{ms} ms")
    } else {
        format!("{:.1} s", ms as f64 / 1000.0)
    }
}

/// The summary lines (without the patch or logs): outcome, resources used (against the
/// budget when it is known), every rejection, changed paths, egress decisions.
#[must_use]
pub fn lines(m: &ResultManifest, budget: Option<&Budget>) -> Vec<String> {
    let mut out = vec![format!(
        "  outcome     {} ({})",
        word(&m.outcome),
        ending(&m.execution)
    )];
    let of = |b: Option<u64>, f: &dyn Fn(u64) -> String| {
        b.map(|b| format!(" of {}", f(b))).unwrap_or_default()
    };
    let e = &m.execution;
    out.push(format!(
        "  used        wall {}{}, cpu {}{}, peak memory {}{}",
        duration(e.wall_ms),
        of(budget.and_then(|b| b.wall_seconds), &|s| format!("{s} s")),
        duration(e.cpu_ms),
        of(budget.and_then(|b| b.cpu_seconds), &|s| format!("{s} s")),
        size(e.peak_memory_bytes),
        of(budget.and_then(|b| b.memory_bytes), &size),
    ));
    if let Some(cap) = e.cpu_cap_millicores {
        out.push(format!("  cpu cap     {} CPU(s)", cpus(cap)));
    }
    for r in &m.rejections {
        out.push(format!(
            "  rejection   {} {}: {}",
            r.code,
            escape(r.path.as_deref().unwrap_or("-")),
            escape(&r.detail)
        ));
    }
    if let Some(c) = &m.candidate {
        for p in &c.changed_paths {
            out.push(format!(
                "  changed     {} {}",
                word(&p.change),
                escape(&p.path)
            ));
        }
    }
    for p in &m.ignored_paths {
        out.push(format!(
            "  ignored     {} (covered by .gitignore; not in the patch)",
            escape(p)
        ));
    }
    for n in &m.network {
        if n.allowed {
            out.push(format!(
                "  egress      allowed {} ({} connection(s), {} up, {} down)",
                escape(&n.destination),
                n.connections,
                size(n.bytes_up),
                size(n.bytes_down)
            ));
        } else {
            out.push(format!(
                "  egress      refused {}: {} ({} time(s))",
                escape(&n.destination),
                escape(n.reason.as_deref().unwrap_or("refused")),
                n.connections
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn sizes_read_as_people_read_them() {
        use super::size;
        assert_eq!(size(780 * 1024), "780 KiB");
        assert_eq!(size(0), "0 B");
        assert_eq!(size(512), "512 B");
        assert_eq!(size(3 << 20), "3.0 MiB");
        assert_eq!(size(2048 << 20), "2.0 GiB");
        assert_eq!(size(300 << 20), "300 MiB");
    }

    #[test]
    fn cpu_caps_read_as_cpus() {
        assert_eq!(super::cpus(2000), "2");
        assert_eq!(super::cpus(1500), "1.5");
        assert_eq!(super::cpus(250), "0.25");
        assert_eq!(super::cpus(1), "0.001");
    }

    #[test]
    fn durations_read_as_people_read_them() {
        assert_eq!(super::duration(23), "23 ms");
        assert_eq!(super::duration(1450), "1.4 s");
    }
}
