//! (cases to be written)

use crate::adversarial::case::Case;

pub fn cases() -> Vec<Case> {
    Vec::new()
}
