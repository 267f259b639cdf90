//! A trusted connection's `upstream`: what corral's credential broker forwards to
//! (ADR-0095). Every problem is `model_upstream_invalid`, naming the field.

use corral_contract::documents::{CredentialSource, ModelUpstream};
use corral_contract::rules::{
    MODEL_UPSTREAM_METHODS, MODEL_UPSTREAM_RESERVED_HEADERS, is_http_token, is_plain_url_path,
};
use corral_contract::{Destination, ReasonCode};

use crate::Findings;

/// The upstream's parts, once its base URL is sound.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParsedBaseUrl {
    /// The host and port (443 when the URL names none).
    pub destination: Destination,
    /// `""` or the plain base path, without a trailing `/`.
    pub base_path: String,
}

/// Splits `https://host[:port][/path]`; `None` with a reason when it is not sound.
pub fn parse_base_url(url: &str) -> Result<ParsedBaseUrl, &'static str> {
    let rest = url
        .strip_prefix("https://")
        .ok_or("must start with https:// (the broker speaks TLS to the upstream)")?;
    if rest.contains(['?', '#', '@']) {
        return Err("no userinfo, query or fragment");
    }
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, ""),
    };
    let has_port = match authority.rfind(']') {
        Some(close) => authority[close..].contains(':'),
        None => authority.contains(':'),
    };
    let with_port = if has_port {
        authority.to_owned()
    } else {
        format!("{authority}:443")
    };
    let destination =
        Destination::parse(&with_port).map_err(|_| "the host is not a valid host[:port]")?;
    if destination.to_string() != with_port {
        return Err("the host is not in its one canonical spelling (lower case, no trailing dot)");
    }
    if !path.is_empty() && (!is_plain_url_path(path) || path.ends_with('/')) {
        return Err(
            "the base path must be plain (no %, \\, //, . or .. segment) without a trailing /",
        );
    }
    Ok(ParsedBaseUrl {
        destination,
        base_path: path.to_owned(),
    })
}

fn is_normal_absolute(path: &str) -> bool {
    path.len() > 1
        && path.starts_with('/')
        && !path.ends_with('/')
        && !path.contains('\0')
        && path[1..]
            .split('/')
            .all(|c| !c.is_empty() && c != "." && c != ".." && !c.chars().any(char::is_control))
}

pub(crate) fn check_upstream(u: &ModelUpstream, at: &str, f: &mut Findings) {
    let code = ReasonCode::ModelUpstreamInvalid;
    if let Err(why) = parse_base_url(&u.base_url) {
        f.add(code, format!("{at}.base_url"), why);
    }
    if u.methods.is_empty() || u.methods.len() > 8 {
        f.add(code, format!("{at}.methods"), "name 1-8 methods");
    }
    for (i, m) in u.methods.iter().enumerate() {
        if !MODEL_UPSTREAM_METHODS.contains(&m.as_str()) {
            f.add(
                code,
                format!("{at}.methods[{i}]"),
                format!("must be one of {}", MODEL_UPSTREAM_METHODS.join(", ")),
            );
        } else if u.methods[..i].contains(m) {
            f.add(code, format!("{at}.methods[{i}]"), "named twice");
        }
    }
    if u.path_prefixes.is_empty() || u.path_prefixes.len() > 64 {
        f.add(
            code,
            format!("{at}.path_prefixes"),
            "name 1-64 path prefixes",
        );
    }
    for (i, p) in u.path_prefixes.iter().enumerate() {
        if !is_plain_url_path(p) {
            f.add(
                code,
                format!("{at}.path_prefixes[{i}]"),
                "must be a plain absolute path (no %, \\, //, ?, #, . or .. segment)",
            );
        } else if u.path_prefixes[..i].contains(p) {
            f.add(code, format!("{at}.path_prefixes[{i}]"), "named twice");
        }
    }
    match &u.credential {
        CredentialSource::File(p) if !is_normal_absolute(p) => f.add(
            code,
            format!("{at}.credential.file"),
            "must be a normalized absolute host path",
        ),
        CredentialSource::Env(n)
            if n.is_empty()
                || n.len() > 256
                || n.starts_with(|c: char| c.is_ascii_digit())
                || !n.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') =>
        {
            f.add(
                code,
                format!("{at}.credential.env"),
                "must be a variable name ([A-Za-z_][A-Za-z0-9_]*)",
            );
        }
        _ => {}
    }
    if !is_http_token(&u.credential_header)
        || MODEL_UPSTREAM_RESERVED_HEADERS
            .iter()
            .any(|h| h.eq_ignore_ascii_case(&u.credential_header))
    {
        f.add(
            code,
            format!("{at}.credential_header"),
            "must be a header name the broker does not set itself (an HTTP token)",
        );
    }
    if !u.credential_scheme.is_empty() && !is_http_token(&u.credential_scheme) {
        f.add(
            code,
            format!("{at}.credential_scheme"),
            "must be empty or an HTTP token (Bearer)",
        );
    }
    if let Some(ca) = &u.ca_file
        && !is_normal_absolute(ca)
    {
        f.add(
            code,
            format!("{at}.ca_file"),
            "must be a normalized absolute host path",
        );
    }
    let b = &u.budgets;
    for (name, v, min, max) in [
        ("calls", b.calls, 1, 1_000_000),
        ("request_bytes", b.request_bytes, 1024, 16 << 30),
        ("response_bytes", b.response_bytes, 1024, 16 << 30),
        ("call_seconds", b.call_seconds, 1, 86_400),
        ("total_seconds", b.total_seconds, 1, 604_800),
    ] {
        if !(min..=max).contains(&v) {
            f.add(
                code,
                format!("{at}.budgets.{name}"),
                format!("must be {min}-{max}"),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base_urls_are_https_with_one_spelling() {
        let p = parse_base_url("https://api.openai.com/v1").unwrap();
        assert_eq!(
            (p.destination.to_string(), p.base_path.as_str()),
            ("api.openai.com:443".to_owned(), "/v1")
        );
        let p = parse_base_url("https://127.0.0.1:8443").unwrap();
        assert_eq!((p.destination.port, p.base_path.as_str()), (8443, ""));
        for bad in [
            "http://api.openai.com/v1",
            "https://user@api.openai.com/v1",
            "https://api.openai.com/v1?x=1",
            "https://api.openai.com/v1#f",
            "https://API.openai.com/v1",
            "https://api.openai.com./v1",
            "https://api.openai.com/v1/",
            "https://api.openai.com/v1/../admin",
            "https://api.openai.com/%2e%2e",
            "https://api.openai.com:0443/v1",
            "https:///v1",
            "https://127.1/v1",
        ] {
            assert!(parse_base_url(bad).is_err(), "{bad}");
        }
    }
}
