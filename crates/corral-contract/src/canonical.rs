//! Canonical JSON and `sha256:` digests.

use std::fmt;
use std::io;
use std::ops::RangeInclusive;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::ser::{CharEscape, CompactFormatter, Formatter, PrettyFormatter};
use sha2::{Digest as _, Sha256};

/// Code points that corral's JSON writer always spells as `\uXXXX` escapes, never raw: the
/// ones a terminal or a reviewer's viewer does not show as themselves (bidi overrides, embeddings,
/// isolates and marks, C1 controls, line and paragraph separators, zero-width and other
/// default-ignorable code points, variation selectors, tag characters), so worker-controlled
/// text (changed paths, rejection details, host names) cannot spoof what a reader sees.
///
/// C0 controls (U+0000..U+001F), `"` and `\` are not listed: JSON itself requires escaping
/// them and serde_json does (`\b \f \n \r \t`, else `\u00XX`). Everything else, including
/// other non-ASCII text (`é`, `日本`), is written raw as UTF-8.
///
/// The same set is what the command line's text mode escapes for terminals (together with the
/// C0 controls).
pub const JSON_ESCAPED: &[RangeInclusive<char>] = &[
    '\u{007F}'..='\u{009F}',   // DEL and the C1 controls
    '\u{00AD}'..='\u{00AD}',   // SOFT HYPHEN
    '\u{034F}'..='\u{034F}',   // COMBINING GRAPHEME JOINER
    '\u{061C}'..='\u{061C}',   // ARABIC LETTER MARK
    '\u{115F}'..='\u{1160}',   // HANGUL CHOSEONG/JUNGSEONG FILLER
    '\u{17B4}'..='\u{17B5}',   // KHMER VOWEL INHERENT AQ/AA
    '\u{180B}'..='\u{180F}',   // MONGOLIAN FREE VARIATION SELECTORS, VOWEL SEPARATOR
    '\u{200B}'..='\u{200F}',   // ZERO WIDTH SPACE/NON-JOINER/JOINER, LRM, RLM
    '\u{2028}'..='\u{202E}',   // LINE/PARAGRAPH SEPARATOR, bidi embeddings and overrides
    '\u{2060}'..='\u{206F}',   // WORD JOINER, invisible operators, bidi isolates, deprecated
    '\u{3164}'..='\u{3164}',   // HANGUL FILLER
    '\u{FE00}'..='\u{FE0F}',   // VARIATION SELECTORS
    '\u{FEFF}'..='\u{FEFF}',   // ZERO WIDTH NO-BREAK SPACE (BOM)
    '\u{FFA0}'..='\u{FFA0}',   // HALFWIDTH HANGUL FILLER
    '\u{FFF0}'..='\u{FFFB}',   // unassigned specials, interlinear annotation
    '\u{E0000}'..='\u{E0FFF}', // tags, variation selectors supplement, reserved ignorables
];

/// Is `c` in [`JSON_ESCAPED`]?
#[must_use]
pub fn is_json_escaped(c: char) -> bool {
    c >= '\u{007F}' && JSON_ESCAPED.iter().any(|r| r.contains(&c))
}

/// Canonical JSON: object keys sorted, no insignificant white space, UTF-8, and one spelling
/// for every string.
///
/// serde_json's `Value` keeps objects in a `BTreeMap` (the `preserve_order` feature is off in
/// this workspace; ADR-0004), so converting to `Value` first sorts every object's keys.
///
/// String spelling (object keys too): `"` and `\` as `\"` and `\\`; the C0 controls as
/// serde_json writes them (`\b \f \n \r \t`, else `\u00XX`); every code point of
/// [`JSON_ESCAPED`] as `\uXXXX` with lowercase hex (a surrogate pair beyond the BMP, e.g.
/// U+E0041 as `\udb40\udc41`); every other character raw, `/` included. No other escape is
/// canonical, so parsing canonical bytes and writing them again gives the same bytes, and
/// `corral verify` refuses a manifest that spells a string any other way (`NotCanonical`).
///
/// The escaping is part of the canonical form, hence of every digest over it ([`digest_of`],
/// manifest and policy digests): a document holding one of these code points hashes over its
/// escaped spelling.
#[must_use]
pub fn canonical_json<T: Serialize + ?Sized>(value: &T) -> Vec<u8> {
    match serde_json::to_value(value) {
        Ok(v) => write_json(&v, Escaping(CompactFormatter)).unwrap_or_default(),
        Err(_) => Vec::new(),
    }
}

/// Indented JSON for people (`corral schema`, `corral export`): keys sorted like
/// [`canonical_json`] and strings spelled the same way (so nothing of [`JSON_ESCAPED`] is raw),
/// indented by two spaces. Not canonical (white space); never hash it.
pub fn pretty_json<T: Serialize + ?Sized>(value: &T) -> Result<String, serde_json::Error> {
    let v = serde_json::to_value(value)?;
    let bytes = write_json(&v, Escaping(PrettyFormatter::new())).map_err(serde_json::Error::io)?;
    // The writer emits only whole UTF-8 strings and ASCII, so this never fails.
    String::from_utf8(bytes).map_err(|e| serde_json::Error::io(io::Error::other(e)))
}

fn write_json<F: Formatter>(value: &serde_json::Value, formatter: F) -> io::Result<Vec<u8>> {
    let mut out = Vec::with_capacity(128);
    let mut ser = serde_json::Serializer::with_formatter(&mut out, formatter);
    value.serialize(&mut ser).map_err(io::Error::other)?;
    Ok(out)
}

/// A formatter that writes [`JSON_ESCAPED`] code points as `\uXXXX`; everything else as `F`.
struct Escaping<F>(F);

impl<F: Formatter> Formatter for Escaping<F> {
    fn write_string_fragment<W>(&mut self, writer: &mut W, fragment: &str) -> io::Result<()>
    where
        W: ?Sized + io::Write,
    {
        let mut start = 0;
        for (i, c) in fragment.char_indices() {
            if is_json_escaped(c) {
                writer.write_all(&fragment.as_bytes()[start..i])?;
                let mut units = [0u16; 2];
                for unit in c.encode_utf16(&mut units) {
                    write!(writer, "\\u{unit:04x}")?;
                }
                start = i + c.len_utf8();
            }
        }
        writer.write_all(&fragment.as_bytes()[start..])
    }

    fn write_char_escape<W>(&mut self, writer: &mut W, char_escape: CharEscape) -> io::Result<()>
    where
        W: ?Sized + io::Write,
    {
        self.0.write_char_escape(writer, char_escape)
    }

    fn begin_array<W: ?Sized + io::Write>(&mut self, writer: &mut W) -> io::Result<()> {
        self.0.begin_array(writer)
    }

    fn end_array<W: ?Sized + io::Write>(&mut self, writer: &mut W) -> io::Result<()> {
        self.0.end_array(writer)
    }

    fn begin_array_value<W>(&mut self, writer: &mut W, first: bool) -> io::Result<()>
    where
        W: ?Sized + io::Write,
    {
        self.0.begin_array_value(writer, first)
    }

    fn end_array_value<W: ?Sized + io::Write>(&mut self, writer: &mut W) -> io::Result<()> {
        self.0.end_array_value(writer)
    }

    fn begin_object<W: ?Sized + io::Write>(&mut self, writer: &mut W) -> io::Result<()> {
        self.0.begin_object(writer)
    }

    fn end_object<W: ?Sized + io::Write>(&mut self, writer: &mut W) -> io::Result<()> {
        self.0.end_object(writer)
    }

    fn begin_object_key<W>(&mut self, writer: &mut W, first: bool) -> io::Result<()>
    where
        W: ?Sized + io::Write,
    {
        self.0.begin_object_key(writer, first)
    }

    fn end_object_key<W: ?Sized + io::Write>(&mut self, writer: &mut W) -> io::Result<()> {
        self.0.end_object_key(writer)
    }

    fn begin_object_value<W: ?Sized + io::Write>(&mut self, writer: &mut W) -> io::Result<()> {
        self.0.begin_object_value(writer)
    }

    fn end_object_value<W: ?Sized + io::Write>(&mut self, writer: &mut W) -> io::Result<()> {
        self.0.end_object_value(writer)
    }
}

/// Digest of a value's canonical JSON.
#[must_use]
pub fn digest_of<T: Serialize + ?Sized>(value: &T) -> Digest {
    Digest::of_bytes(&canonical_json(value))
}

/// An OCI-style digest, `sha256:<64 lowercase hex>`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Digest([u8; 32]);

/// A string that is not `sha256:<64 lowercase hex>`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("digest must be sha256:<64 lowercase hex>")]
pub struct DigestError;

impl Digest {
    /// The SHA-256 of `bytes`.
    #[must_use]
    pub fn of_bytes(bytes: &[u8]) -> Self {
        Self(Sha256::digest(bytes).into())
    }

    /// A digest from its 32 raw bytes (as a hasher returns them).
    #[must_use]
    pub fn from_raw(bytes: [u8; 32]) -> Self {
        Self(bytes)
    }

    /// The 64 hex digits, as used for file names in the artifact store.
    #[must_use]
    pub fn hex(&self) -> String {
        self.0.iter().map(|b| format!("{b:02x}")).collect()
    }

    /// Parses 64 lowercase hex digits without the `sha256:` prefix.
    pub fn from_hex(hex: &str) -> Result<Self, DigestError> {
        if hex.len() != 64 || !hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
            return Err(DigestError);
        }
        let mut out = [0u8; 32];
        for (i, slot) in out.iter_mut().enumerate() {
            *slot = u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).map_err(|_| DigestError)?;
        }
        Ok(Self(out))
    }
}

impl fmt::Display for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "sha256:{}", self.hex())
    }
}

impl FromStr for Digest {
    type Err = DigestError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::from_hex(s.strip_prefix("sha256:").ok_or(DigestError)?)
    }
}

impl Serialize for Digest {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Digest {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(feature = "schema")]
impl schemars::JsonSchema for Digest {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Digest".into()
    }
    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "string",
            "pattern": "^sha256:[0-9a-f]{64}$(?!\\n)",
            "description": "A SHA-256 digest: sha256: and 64 lowercase hex digits."
        })
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, reason = "test code")]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn canonical_sorts_keys_without_space() {
        let v = serde_json::json!({"b": 1, "a": {"d": [1, 2], "c": "x"}});
        assert_eq!(canonical_json(&v), br#"{"a":{"c":"x","d":[1,2]},"b":1}"#);
    }

    #[test]
    fn digest_roundtrip() {
        let d = Digest::of_bytes(b"abc");
        assert_eq!(
            d.to_string(),
            "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_eq!(d.to_string().parse::<Digest>(), Ok(d));
        assert!("sha256:BA78".parse::<Digest>().is_err());
    }

    fn canonical_str(s: &str) -> String {
        String::from_utf8(canonical_json(s)).unwrap_or_default()
    }

    #[test]
    fn hostile_code_points_are_escaped_in_lowercase_hex() {
        for (raw, spelled) in [
            ("\u{0085}", r#""\u0085""#),                 // C1 NEXT LINE
            ("\u{009b}", r#""\u009b""#),                 // C1 CSI
            ("\u{007f}", r#""\u007f""#),                 // DEL
            ("a\u{202e}b", r#""a\u202eb""#),             // RIGHT-TO-LEFT OVERRIDE
            ("\u{2066}x\u{2069}", r#""\u2066x\u2069""#), // isolates
            ("\u{200d}", r#""\u200d""#),                 // ZERO WIDTH JOINER
            ("\u{feff}", r#""\ufeff""#),                 // BOM
            ("\u{2028}\u{2029}", r#""\u2028\u2029""#),
            ("\u{061c}\u{200e}\u{200f}", r#""\u061c\u200e\u200f""#),
            ("\u{e0041}", r#""\udb40\udc41""#), // TAG LATIN CAPITAL LETTER A
            ("\u{e0fff}", r#""\udb43\udfff""#),
            ("\u{fe0f}\u{3164}", r#""\ufe0f\u3164""#),
        ] {
            assert_eq!(canonical_str(raw), spelled, "{raw:?}");
            let back: String = serde_json::from_str(spelled).unwrap_or_default();
            assert_eq!(back, raw);
        }
        // Object keys are strings too.
        let v = serde_json::json!({ "k\u{202e}": ["\u{202e}"] });
        assert_eq!(canonical_json(&v), br#"{"k\u202e":["\u202e"]}"#.to_vec());
    }

    #[test]
    fn plain_text_and_json_escapes_keep_their_spelling() {
        assert_eq!(
            canonical_str("é 日本 ü ‐ 𝄞 \u{a0}"),
            "\"é 日本 ü ‐ 𝄞 \u{a0}\""
        );
        assert_eq!(canonical_str("a/b"), r#""a/b""#);
        assert_eq!(
            canonical_str("\"\\\n\t\u{1}\u{1b}"),
            r#""\"\\\n\t\u0001\u001b""#
        );
        // Just outside the ranges.
        assert_eq!(
            canonical_str("\u{7e}\u{a0}\u{2027}\u{202f}\u{fffc}\u{e1000}"),
            "\"\u{7e}\u{a0}\u{2027}\u{202f}\u{fffc}\u{e1000}\""
        );
    }

    #[test]
    fn parse_then_canonical_gives_the_same_bytes() {
        let v = serde_json::json!({
            "path": "src/\u{202e}txt.exe",
            "detail": "\u{85}\u{9b}31m \u{2066}é\u{2069} \u{e0041}\u{e007f}",
            "n": [1, -2, 0.5, null, true],
        });
        let bytes = canonical_json(&v);
        let text = String::from_utf8(bytes.clone()).unwrap();
        assert_eq!(
            text.chars().filter(|c| !c.is_ascii()).collect::<String>(),
            "é",
            "{text}"
        );
        let parsed: serde_json::Value = serde_json::from_slice(&bytes).unwrap_or_default();
        assert_eq!(parsed, v);
        assert_eq!(canonical_json(&parsed), bytes);
        // A raw spelling of the same value is not canonical.
        let raw = serde_json::to_vec(&v).unwrap_or_default();
        assert_ne!(raw, bytes);
        let reparsed: serde_json::Value = serde_json::from_slice(&raw).unwrap_or_default();
        assert_eq!(canonical_json(&reparsed), bytes);
    }

    #[test]
    fn pretty_json_escapes_the_same_set() {
        let v = serde_json::json!({ "b": ["x\u{202e}"], "a": "é" });
        assert_eq!(
            pretty_json(&v).unwrap_or_default(),
            "{\n  \"a\": \"é\",\n  \"b\": [\n    \"x\\u202e\"\n  ]\n}"
        );
        // ASCII content: byte for byte what serde_json's pretty printer writes.
        let plain = serde_json::json!({ "z": {"y": [1, 2, {}], "x": []}, "a": "q/\"" });
        assert_eq!(
            pretty_json(&plain).unwrap_or_default(),
            serde_json::to_string_pretty(&plain).unwrap_or_default()
        );
    }

    #[test]
    fn escaped_set_is_what_the_brief_lists() {
        let listed = |c: char| {
            matches!(c,
                '\u{7F}'..='\u{9F}' | '\u{AD}' | '\u{34F}' | '\u{61C}' | '\u{115F}' | '\u{1160}'
                | '\u{17B4}' | '\u{17B5}' | '\u{180B}'..='\u{180F}' | '\u{200B}'..='\u{200F}'
                | '\u{2028}'..='\u{202E}' | '\u{2060}'..='\u{206F}' | '\u{3164}'
                | '\u{FE00}'..='\u{FE0F}' | '\u{FEFF}' | '\u{FFA0}' | '\u{FFF0}'..='\u{FFFB}'
                | '\u{E0000}'..='\u{E0FFF}')
        };
        for c in (0..=0x10_FFFF).filter_map(char::from_u32) {
            assert_eq!(is_json_escaped(c), listed(c), "{:04x}", u32::from(c));
        }
    }

    /// Characters from the escaped set, their neighbours, ASCII (C0 included) and anything.
    fn hostile_char() -> impl Strategy<Value = char> {
        prop_oneof![
            proptest::char::ranges(JSON_ESCAPED.into()),
            proptest::char::ranges(
                vec![
                    '\u{0}'..='\u{7f}',
                    '\u{a0}'..='\u{ff}',
                    '\u{2000}'..='\u{2070}'
                ]
                .into()
            ),
            any::<char>(),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        #[test]
        fn canonical_strings_hold_nothing_escaped_raw_and_round_trip(
            chars in proptest::collection::vec(hostile_char(), 0..32),
        ) {
            let s: String = chars.into_iter().collect();
            let value = serde_json::json!({ s.clone(): [s.clone(), "é"] });
            let bytes = canonical_json(&value);
            let text = std::str::from_utf8(&bytes).unwrap();
            prop_assert!(!text.chars().any(is_json_escaped), "{:?}", text);
            prop_assert!(!text.chars().any(|c| c < ' '), "{:?}", text);
            let parsed: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
            prop_assert_eq!(&parsed, &value);
            prop_assert_eq!(canonical_json(&parsed), bytes.clone());
            // Every character outside the set (and C0, `"`, `\\`) is written raw.
            let raw_kept: String = s
                .chars()
                .filter(|c| !is_json_escaped(*c) && *c >= ' ' && *c != '"' && *c != '\\')
                .collect();
            let shown: String = text.chars().filter(|c| !c.is_ascii()).collect();
            let expected: String = format!("{raw_kept}{raw_kept}é")
                .chars()
                .filter(|c| !c.is_ascii())
                .collect();
            prop_assert_eq!(shown, expected);
            let pretty = pretty_json(&value).unwrap();
            prop_assert!(!pretty.chars().any(is_json_escaped));
            prop_assert_eq!(serde_json::from_str::<serde_json::Value>(&pretty).unwrap(), value);
        }
    }
}
