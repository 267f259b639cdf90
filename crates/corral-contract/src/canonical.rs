//! Canonical JSON and `sha256:` digests.

use std::fmt;
use std::str::FromStr;

use schemars::JsonSchema;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use sha2::{Digest as _, Sha256};

/// Canonical JSON: object keys sorted, no insignificant white space, UTF-8.
///
/// serde_json's `Value` keeps objects in a `BTreeMap` (the `preserve_order` feature is off in
/// this workspace; ADR-0004), so converting to `Value` first sorts every object's keys.
#[must_use]
pub fn canonical_json<T: Serialize + ?Sized>(value: &T) -> Vec<u8> {
    match serde_json::to_value(value) {
        Ok(v) => serde_json::to_vec(&v).unwrap_or_default(),
        Err(_) => Vec::new(),
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
    #[must_use]
    pub fn of_bytes(bytes: &[u8]) -> Self {
        Self(Sha256::digest(bytes).into())
    }

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

impl JsonSchema for Digest {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Digest".into()
    }
    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "string",
            "pattern": "^sha256:[0-9a-f]{64}$"
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
