//! Safe display of untrusted text: control characters, bidi overrides and escape sequences
//! never reach a terminal raw (OUT-04, CAP-10, CAP-11), in text mode or as JSON.

use std::io::Write as _;

use corral_contract::canonical::{canonical_json, is_json_escaped};
use serde::Serialize;

/// Escapes control characters (C0, DEL, C1), bidi controls and the other invisible code
/// points of [`corral_contract::canonical::JSON_ESCAPED`]: the set JSON output escapes too.
#[must_use]
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if c.is_control() || is_json_escaped(c) {
            out.extend(c.escape_unicode());
        } else {
            out.push(c);
        }
    }
    out
}

/// The contract's word for a value that serializes as one string (an outcome, a
/// termination, a change kind): `candidate_captured`, `wall_timeout`, `modified`. Never
/// Rust's Debug text.
#[must_use]
pub fn word<T: Serialize + ?Sized>(value: &T) -> String {
    match serde_json::to_value(value) {
        Ok(serde_json::Value::String(s)) => s,
        Ok(other) => other.to_string(),
        Err(_) => "?".to_owned(),
    }
}

/// How the worker ended, in the contract's words: `exited 0`, `signaled 9`, `wall_timeout`.
#[must_use]
pub fn ending(e: &corral_contract::manifest::ExecutionRecord) -> String {
    use corral_contract::manifest::Termination;
    match e.termination {
        Termination::Exited => format!(
            "exited {}",
            e.exit_code.map_or("?".to_owned(), |c| c.to_string())
        ),
        Termination::Signaled => format!(
            "signaled {}",
            e.signal.map_or("?".to_owned(), |c| c.to_string())
        ),
        other => word(&other),
    }
}

/// Prints `value` on stdout as one line of canonical JSON: the one writer of every `--json`
/// output, so no bidi, C1 or other invisible code point of worker-controlled text is raw
/// (they are `\uXXXX` escapes, which canonical JSON always uses for them).
pub fn print_json<T: Serialize + ?Sized>(value: &T) {
    print_bytes_line(&canonical_json(value));
}

/// Prints bytes that already are canonical JSON (a stored manifest) as one line.
pub fn print_bytes_line(bytes: &[u8]) {
    let mut out = std::io::stdout().lock();
    // A closed stdout is the reader's choice; the exit code still tells the outcome.
    let _ = out
        .write_all(bytes)
        .and_then(|()| out.write_all(b"\n"))
        .and_then(|()| out.flush());
}

/// Writes data to stdout (what the `out!` and `out_raw!` macros call). A reader that went
/// away (`corral demo | head -1`: EPIPE) ends the output quietly, never in a panic: the
/// command finishes, cleans up and exits with its contract code. Another write error is
/// said on stderr once per line, and the exit code still tells the outcome.
pub fn write_stdout(args: std::fmt::Arguments<'_>, newline: bool) {
    let mut out = std::io::stdout().lock();
    let r = out.write_fmt(args).and_then(|()| {
        if newline {
            out.write_all(b"\n")
        } else {
            out.flush()
        }
    });
    if let Err(e) = r
        && e.kind() != std::io::ErrorKind::BrokenPipe
    {
        eprintln!("corral: writing stdout: {e}");
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn contract_words_not_debug_text() {
        use super::word;
        use corral_contract::manifest::{ChangeKind, Outcome, Termination};
        assert_eq!(word(&Outcome::CandidateCaptured), "candidate_captured");
        assert_eq!(word(&Termination::WallTimeout), "wall_timeout");
        assert_eq!(word(&ChangeKind::Modified), "modified");
    }

    #[test]
    fn escapes_terminal_controls() {
        assert_eq!(
            super::escape("a\x1b[31mb\u{202e}c\n"),
            "a\\u{1b}[31mb\\u{202e}c\\u{a}"
        );
        assert_eq!(super::escape("plain é 日本"), "plain é 日本");
        assert_eq!(
            super::escape("\u{85}\u{2028}\u{2066}\u{e0041}"),
            "\\u{85}\\u{2028}\\u{2066}\\u{e0041}"
        );
    }
}
