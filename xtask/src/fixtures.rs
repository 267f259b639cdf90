//! `cargo xtask fixtures`: the fnmatch agreement corpus, and the adversarial fixtures
//! (`adversarial::fixtures`).
//!
//! Patterns and names are generated here deterministically (a fixed-seed xorshift, plus a
//! hand-written list of nasty cases); python3's `fnmatch.fnmatchcase` decides every expected
//! result. The corpus is committed, and `corral-contract`'s tests assert the Rust matcher
//! agrees on every row, so the oracle is not needed to run the tests.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

use anyhow::{Context, Result, bail};
use serde_json::{Value, json};

pub const CORPUS: &str = "crates/corral-contract/tests/fixtures/fnmatch-corpus.json";

/// Patterns chosen to hit every branch of CPython's `translate`.
const NASTY_PATTERNS: &[&str] = &[
    "*",
    "**",
    "?",
    "[",
    "]",
    "[]",
    "[]]",
    "[!]",
    "[!]]",
    "[]-]",
    "[!]-]",
    "[a-]",
    "[-a]",
    "[!-a]",
    "[a-c-e]",
    "[z-a]",
    "[!z-a]",
    "[a--]",
    "[--a]",
    "[!--]",
    "[---]",
    "[a-z0-9]",
    "[!a-z]",
    "[^a]",
    "[!^a]",
    "[[]",
    "[[]]",
    "[\\]",
    "[\\-]",
    "[a\\-z]",
    "[\\]]",
    "[&&]",
    "[a&&b]",
    "[~~]",
    "[||]",
    "{a,b}",
    "{a",
    "a}",
    "\\*",
    "\\",
    "a\\b",
    "**/*.pem",
    "*.pem",
    "src/",
    "src",
    "src/*",
    "src/**",
    "src/*.rs",
    "*/",
    ".github/",
    ".github/*",
    "a*b*c",
    "*a*",
    "a?c",
    "??",
    "*?",
    "?*",
    "[!/]*",
    "*[!/]",
    "[/]",
    "x[y",
    "x[!y",
    "x[y-",
    "[é]",
    "[à-ü]",
    "[!é]",
    "é*",
    "*.[ch]",
    "[.]*",
    "[*]",
    "[?]",
    "[!*?]",
    "a[!b-d]e",
    "[b-b]",
    "[c-a-e]",
    "[a-c-a]",
    "[!a-]",
    "**/node_modules/**",
    "docs*/",
    "[A-Z]*",
    "*[0-9]",
    "[\u{1}-\u{1f}]",
    "[ -~]",
    "* *",
];

const NASTY_NAMES: &[&str] = &[
    "",
    "a",
    "b",
    "-",
    "]",
    "[",
    "^",
    "!",
    "\\",
    "&",
    "~",
    "|",
    "/",
    "//",
    "a/b",
    "src",
    "src/",
    "src/a.rs",
    "src/a/b.rs",
    "srcX",
    "src-evil/p.py",
    "Src/x",
    "k.pem",
    "a/k.pem",
    ".github/workflows/ci.yml",
    "{a,b}",
    "a",
    "abc",
    "aXbYc",
    "a\nb",
    "é",
    "ü",
    "ab/cd",
    "x[y",
    "*",
    "?",
    "a-z",
    "node_modules/x",
    "a/node_modules/b",
    "docs1/",
    "docs/",
    "A",
    "Z9",
    "a b",
    " ",
    "\u{7}",
];

/// Characters random patterns and names are built from.
const ALPHABET: &[char] = &[
    'a', 'b', 'c', 'z', 'A', '0', '9', '/', '.', '-', '_', ' ', '*', '?', '[', ']', '!', '^', '\\',
    '{', '}', ',', '&', '~', '|', 'é', '\n',
];

struct XorShift(u64);

impl XorShift {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }
    fn below(&mut self, n: usize) -> usize {
        usize::try_from(self.next() % (n as u64)).unwrap_or(0)
    }
    fn string(&mut self, max_len: usize) -> String {
        let len = self.below(max_len + 1);
        (0..len)
            .map(|_| ALPHABET[self.below(ALPHABET.len())])
            .collect()
    }
}

fn pairs() -> Vec<(String, String)> {
    let mut out = Vec::new();
    for p in NASTY_PATTERNS {
        for n in NASTY_NAMES {
            out.push(((*p).to_owned(), (*n).to_owned()));
        }
    }
    let mut rng = XorShift(0x5eed_c0ff_ee15_600d);
    for _ in 0..400 {
        let pattern = rng.string(8);
        for _ in 0..12 {
            // Half the names are mutations of the pattern itself, so matches are common.
            let name = if rng.below(2) == 0 {
                pattern
                    .chars()
                    .map(|c| {
                        if matches!(c, '*' | '?' | '[' | ']') {
                            ALPHABET[rng.below(8)]
                        } else {
                            c
                        }
                    })
                    .collect()
            } else {
                rng.string(8)
            };
            out.push((pattern.clone(), name));
        }
    }
    out
}

const ORACLE: &str = r#"
import fnmatch, json, sys
pairs = json.load(sys.stdin)
json.dump([fnmatch.fnmatchcase(n, p) for p, n in pairs], sys.stdout)
"#;

pub fn run(root: &Path, check: bool) -> Result<()> {
    if !crate::adversarial::fixtures::generate(root, check, false)? {
        bail!("tests/adversarial is out of date; run `cargo xtask fixtures`");
    }
    let pairs = pairs();
    let input = serde_json::to_vec(&pairs)?;
    let mut child = Command::new("python3")
        .args(["-c", ORACLE])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .context("python3 is needed to generate the fnmatch corpus")?;
    child.stdin.take().context("stdin")?.write_all(&input)?;
    let out = child.wait_with_output()?;
    if !out.status.success() {
        bail!("python3 fnmatch oracle failed");
    }
    let results: Vec<bool> = serde_json::from_slice(&out.stdout)?;
    if results.len() != pairs.len() {
        bail!(
            "oracle returned {} results for {} pairs",
            results.len(),
            pairs.len()
        );
    }
    let rows: Vec<Value> = pairs
        .iter()
        .zip(&results)
        .map(|((p, n), r)| json!([p, n, r]))
        .collect();
    let mut text = String::from("[\n");
    for (i, row) in rows.iter().enumerate() {
        text.push_str(&serde_json::to_string(row)?);
        text.push_str(if i + 1 < rows.len() { ",\n" } else { "\n" });
    }
    text.push_str("]\n");
    let matches = results.iter().filter(|r| **r).count();
    if !crate::write_or_check(&root.join(CORPUS), &text, check)? {
        bail!("the fnmatch corpus drifted from python3's fnmatchcase");
    }
    println!("fnmatch corpus: {} rows, {} matching", rows.len(), matches);
    Ok(())
}
