//! The Rust matcher agrees with python3's `fnmatch.fnmatchcase` on every row of the committed
//! corpus (`cargo xtask fixtures` regenerates it from the oracle).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code"
)]

use corral_contract::fnmatchcase;

#[test]
fn agrees_with_python_on_every_row() {
    let rows: Vec<(String, String, bool)> =
        serde_json::from_str(include_str!("fixtures/fnmatch-corpus.json")).unwrap();
    assert!(rows.len() > 5000, "corpus too small: {}", rows.len());
    let mut disagreements = Vec::new();
    for (pattern, name, expected) in &rows {
        if fnmatchcase(name, pattern) != *expected {
            disagreements.push(format!(
                "fnmatchcase({name:?}, {pattern:?}) should be {expected}"
            ));
        }
    }
    assert!(
        disagreements.is_empty(),
        "{} disagreements:\n{}",
        disagreements.len(),
        disagreements.join("\n")
    );
    // The corpus must exercise both outcomes.
    assert!(rows.iter().any(|r| r.2) && rows.iter().any(|r| !r.2));
}
