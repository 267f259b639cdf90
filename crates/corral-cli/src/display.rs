//! Safe display of untrusted text: control characters, bidi overrides and escape sequences
//! never reach a terminal raw (OUT-04, CAP-10, CAP-11).

/// Escapes control characters, bidi controls and other invisible format characters.
#[must_use]
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        let invisible = matches!(c,
            '\u{200B}'..='\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}' | '\u{FEFF}');
        if c.is_control() || invisible {
            out.extend(c.escape_unicode());
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn escapes_terminal_controls() {
        assert_eq!(
            super::escape("a\x1b[31mb\u{202e}c\n"),
            "a\\u{1b}[31mb\\u{202e}c\\u{a}"
        );
        assert_eq!(super::escape("plain é"), "plain é");
    }
}
