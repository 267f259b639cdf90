//! Network destinations `host:port`, parsed into one canonical spelling.
//!
//! Accepted: a DNS name (letters, digits, `-`, labels of 1-63 characters, at most 253 in all;
//! upper case and one trailing dot are folded into the canonical lower-case form), a strict
//! dotted-decimal IPv4 literal, or a bracketed IPv6 literal; then `:` and a decimal port
//! 1-65535 without leading zeros. Everything that a resolver or URL parser might read as an
//! address in another spelling (`127.1`, `0x7f.0.0.1`, `2130706433`, `0177.0.0.1`, zone ids,
//! IPv4-mapped IPv6) is rejected, so one destination has exactly one meaning.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Why a destination was rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DestinationError {
    /// No `:` separates a port.
    #[error("expected host:port")]
    MissingPort,
    /// The port is not 1-65535 in plain decimal.
    #[error("port must be a decimal number 1-65535 without leading zeros")]
    BadPort,
    /// Nothing before the `:`.
    #[error("host is empty")]
    EmptyHost,
    /// An IPv6 literal that is unbracketed, has a zone id, is IPv4-mapped or does not parse.
    #[error("IPv6 literal must be bracketed, without zone id, and not IPv4-mapped")]
    BadIpv6,
    /// A host whose last label is a number but that is not four plain decimal octets.
    #[error("numeric host is not a strict dotted-decimal IPv4 address")]
    AmbiguousNumericHost,
    /// A host that is not a DNS name of letters, digits and inner `-`.
    #[error("host is not a valid DNS name")]
    BadDnsName,
}

/// A canonical host.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Host {
    /// Lower-case, no trailing dot.
    Dns(String),
    /// An IP address (IPv6 is never IPv4-mapped).
    Ip(IpAddr),
}

impl fmt::Display for Host {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Host::Dns(name) => f.write_str(name),
            Host::Ip(IpAddr::V4(ip)) => write!(f, "{ip}"),
            Host::Ip(IpAddr::V6(ip)) => write!(f, "[{ip}]"),
        }
    }
}

impl Host {
    /// Parses a host as written in a destination or an HTTP authority.
    pub fn parse(host: &str) -> Result<Self, DestinationError> {
        if host.is_empty() {
            return Err(DestinationError::EmptyHost);
        }
        if let Some(inner) = host.strip_prefix('[') {
            let inner = inner.strip_suffix(']').ok_or(DestinationError::BadIpv6)?;
            if inner.contains('%') {
                return Err(DestinationError::BadIpv6);
            }
            let ip = Ipv6Addr::from_str(inner).map_err(|_| DestinationError::BadIpv6)?;
            if ip.to_ipv4_mapped().is_some() {
                return Err(DestinationError::BadIpv6);
            }
            return Ok(Host::Ip(IpAddr::V6(ip)));
        }
        if host.contains(':') {
            return Err(DestinationError::BadIpv6);
        }
        let name = host.strip_suffix('.').unwrap_or(host);
        let labels: Vec<&str> = name.split('.').collect();
        let last_is_numeric = labels.last().is_some_and(|l| {
            !l.is_empty() && (l.chars().all(|c| c.is_ascii_digit()) || looks_hex(l))
        });
        if last_is_numeric {
            // WHATWG URL: a host whose last label is a number is an IPv4 address; accept only
            // the strict spelling, without a trailing dot.
            return strict_ipv4(host)
                .map(|ip| Host::Ip(IpAddr::V4(ip)))
                .ok_or(DestinationError::AmbiguousNumericHost);
        }
        if name.is_empty() || name.len() > 253 {
            return Err(DestinationError::BadDnsName);
        }
        for label in &labels {
            let ok = !label.is_empty()
                && label.len() <= 63
                && label.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
                && !label.starts_with('-')
                && !label.ends_with('-');
            if !ok {
                return Err(DestinationError::BadDnsName);
            }
        }
        Ok(Host::Dns(name.to_ascii_lowercase()))
    }
}

fn looks_hex(label: &str) -> bool {
    let lower = label.to_ascii_lowercase();
    lower
        .strip_prefix("0x")
        .is_some_and(|rest| rest.chars().all(|c| c.is_ascii_hexdigit()))
}

/// Four decimal octets 0-255, no leading zeros, nothing else.
fn strict_ipv4(s: &str) -> Option<Ipv4Addr> {
    let parts: Vec<&str> = s.split('.').collect();
    if parts.len() != 4 {
        return None;
    }
    let mut octets = [0u8; 4];
    for (slot, part) in octets.iter_mut().zip(&parts) {
        if part.is_empty()
            || part.len() > 3
            || !part.chars().all(|c| c.is_ascii_digit())
            || (part.len() > 1 && part.starts_with('0'))
        {
            return None;
        }
        *slot = part.parse().ok()?;
    }
    Some(Ipv4Addr::from(octets))
}

/// Parses a port: decimal, 1-65535, no sign, no leading zeros.
pub fn parse_port(s: &str) -> Result<u16, DestinationError> {
    if s.is_empty() || !s.chars().all(|c| c.is_ascii_digit()) || (s.len() > 1 && s.starts_with('0'))
    {
        return Err(DestinationError::BadPort);
    }
    match s.parse::<u16>() {
        Ok(0) | Err(_) => Err(DestinationError::BadPort),
        Ok(port) => Ok(port),
    }
}

/// A canonical `host:port`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Destination {
    /// The canonical host.
    pub host: Host,
    /// The port, 1-65535.
    pub port: u16,
}

impl Destination {
    /// Parses `host:port` into its one canonical form, or says why it is not one.
    pub fn parse(s: &str) -> Result<Self, DestinationError> {
        let (host, port) = s.rsplit_once(':').ok_or(DestinationError::MissingPort)?;
        if host.starts_with('[') != host.ends_with(']') {
            return Err(DestinationError::BadIpv6);
        }
        Ok(Self {
            host: Host::parse(host)?,
            port: parse_port(port)?,
        })
    }
}

impl fmt::Display for Destination {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.host, self.port)
    }
}

impl Serialize for Destination {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Destination {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        Self::parse(&s).map_err(serde::de::Error::custom)
    }
}

#[cfg(feature = "schema")]
impl schemars::JsonSchema for Destination {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Destination".into()
    }
    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "string",
            "pattern": crate::schema::destination_pattern(),
            "description": "host:port (destination_invalid). The host is a DNS name (labels of 1-63 letters, digits and inner '-', at most 253 characters, one trailing dot allowed; its last label not a number), a strict dotted-decimal IPv4 address, or an IPv6 address in brackets (not IPv4-mapped, no zone id); the port is 1-65535 without leading zeros. Admission folds a DNS name to lower case without its trailing dot: that canonical form is what is compared and recorded."
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canonical_forms() {
        let c = |s: &str| Destination::parse(s).map(|d| d.to_string());
        assert_eq!(c("Example.COM.:443"), Ok("example.com:443".into()));
        assert_eq!(c("127.0.0.2:11434"), Ok("127.0.0.2:11434".into()));
        assert_eq!(c("[::1]:80"), Ok("[::1]:80".into()));
        assert_eq!(c("[FD00:EC2:0::254]:80"), Ok("[fd00:ec2::254]:80".into()));
        assert_eq!(c("a-b.c:1"), Ok("a-b.c:1".into()));
    }

    #[test]
    fn ambiguous_spellings_rejected() {
        for bad in [
            "127.1:80",
            "0x7f.0.0.1:80",
            "2130706433:80",
            "0177.0.0.1:80",
            "0:80",
            "01.2.3.4:80",
            "1.2.3.4.:80",
            "[::ffff:127.0.0.1]:80",
            "[fe80::1%25lo]:80",
            "::1:80",
            "a.b:0",
            "a.b:65536",
            "a.b:08080",
            "a.b:+1",
            "a.b",
            "a b:80",
            "a_b.c:80",
            "-a.c:80",
            "a..b:80",
            "*.a.b:80",
            "a.b:80/x",
            "user@a.b:80",
            ":80",
            "[::1:80",
            "a.0x10:80",
            "allowed.test%00.denied.test:8080",
        ] {
            assert!(Destination::parse(bad).is_err(), "{bad:?} accepted");
        }
    }
}
