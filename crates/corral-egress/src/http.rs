//! A strict parser for the one request head the proxy reads per connection.
//!
//! `httparse` tokenizes the request line and the headers; anything ambiguous is refused
//! rather than interpreted: bare LF or CR, obsolete line folding, header names that are not
//! tokens, a repeated `Host` or `Content-Length`, any `Transfer-Encoding` (request smuggling),
//! an over-long head or more than [`MAX_HEADERS`] headers.

use std::io::Read;

/// Largest request head accepted.
pub const MAX_HEAD_BYTES: usize = 32 * 1024;

/// A parsed HTTP/1.x request head: the request line and the headers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestHead {
    /// The request method as sent (`CONNECT`, `GET`, ...).
    pub method: String,
    /// The request target as sent, not interpreted here (`host:port` for `CONNECT`).
    pub target: String,
    /// The HTTP version as sent: `HTTP/1.1` or `HTTP/1.0`, the only ones accepted.
    pub version: String,
    /// Headers in order, names as sent.
    pub headers: Vec<(String, String)>,
}

impl RequestHead {
    /// The single value of a header (case-insensitive name), if present.
    #[must_use]
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    fn count(&self, name: &str) -> usize {
        self.headers
            .iter()
            .filter(|(n, _)| n.eq_ignore_ascii_case(name))
            .count()
    }
}

/// Why a request head was refused; `status` is the HTTP status to answer with.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{status} {reason}")]
pub struct HeadError {
    /// The HTTP status to answer with.
    pub status: u16,
    /// Why the head was refused: a stable snake_case code (`malformed_request_line`,
    /// `request_head_too_large`, ...) the proxy sends in its `X-Corral-Egress` header.
    pub reason: &'static str,
}

const fn bad(reason: &'static str) -> HeadError {
    HeadError {
        status: 400,
        reason,
    }
}

/// Reads until the end of the head. Returns the head and any bytes read past it.
pub fn read_head(stream: &mut impl Read) -> Result<(RequestHead, Vec<u8>), HeadError> {
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 4096];
    loop {
        if let Some(end) = find_end(&buf) {
            if end > MAX_HEAD_BYTES {
                return Err(HeadError {
                    status: 431,
                    reason: "request_head_too_large",
                });
            }
            let rest = buf.split_off(end + 4);
            buf.truncate(end);
            return Ok((parse_head(&buf)?, rest));
        }
        if buf.len() > MAX_HEAD_BYTES {
            return Err(HeadError {
                status: 431,
                reason: "request_head_too_large",
            });
        }
        match stream.read(&mut chunk) {
            Ok(0) => return Err(bad("incomplete_request")),
            Ok(n) => {
                buf.extend_from_slice(&chunk[..n]);
                // An HTTP request starts with a method token; anything else (a SOCKS greeting,
                // TLS sent to the plain port) is refused at once instead of waiting for a head.
                if !buf[0].is_ascii_uppercase() {
                    return Err(bad("not_http"));
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                return Err(HeadError {
                    status: 408,
                    reason: "request_head_timeout",
                });
            }
            Err(_) => return Err(bad("incomplete_request")),
        }
    }
}

fn find_end(buf: &[u8]) -> Option<usize> {
    buf.windows(4).position(|w| w == b"\r\n\r\n")
}

/// Most headers one request head may carry (answered 431 beyond).
pub const MAX_HEADERS: usize = 128;

/// The head (`raw`, without its final blank line) tokenized by `httparse`, under corral's
/// rules: `httparse` takes a bare LF for a line end and skips empty lines before the request
/// line, so those are refused first, from the bytes themselves; it parses the request line
/// with exactly one space between its parts, tokens for the method and header names, and no
/// control character in the target or a value. What it accepts, corral then checks for
/// ambiguity (`Host`, `Content-Length`, `Transfer-Encoding`).
fn parse_head(raw: &[u8]) -> Result<RequestHead, HeadError> {
    let text = std::str::from_utf8(raw).map_err(|_| bad("non_utf8_head"))?;
    let mut lines = text.split("\r\n");
    if text.split("\r\n").any(|l| l.contains(['\n', '\r'])) {
        return Err(bad("bare_line_break"));
    }
    if lines.next().is_none_or(str::is_empty) {
        return Err(bad("empty_request"));
    }
    if lines.any(|l| l.starts_with([' ', '\t'])) {
        return Err(bad("obsolete_line_folding"));
    }
    let mut full = Vec::with_capacity(raw.len() + 4);
    full.extend_from_slice(raw);
    full.extend_from_slice(b"\r\n\r\n");
    let mut slots = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut req = httparse::Request::new(&mut slots);
    match req.parse(&full) {
        Ok(httparse::Status::Complete(n)) if n == full.len() => {}
        // The head ends where read_head found its blank line: anything else is a head
        // httparse reads differently (never expected; refused, not interpreted).
        Ok(_) => return Err(bad("malformed_request_line")),
        Err(e) => {
            return Err(match e {
                httparse::Error::TooManyHeaders => HeadError {
                    status: 431,
                    reason: "too_many_headers",
                },
                httparse::Error::HeaderName => bad("malformed_header_name"),
                httparse::Error::HeaderValue => bad("control_character_in_header"),
                httparse::Error::Version => bad("unsupported_http_version"),
                httparse::Error::NewLine => bad("bare_line_break"),
                httparse::Error::Token | httparse::Error::Status => bad("malformed_request_line"),
            });
        }
    }
    let (Some(method), Some(target), Some(minor)) = (req.method, req.path, req.version) else {
        return Err(bad("malformed_request_line"));
    };
    if target.is_empty() {
        return Err(bad("malformed_target"));
    }
    let mut headers = Vec::with_capacity(req.headers.len());
    for h in req.headers.iter() {
        // Within a UTF-8 head every value is UTF-8; a value split inside a character is not.
        let value = std::str::from_utf8(h.value).map_err(|_| bad("non_utf8_head"))?;
        headers.push((
            h.name.to_owned(),
            value.trim_matches([' ', '\t']).to_owned(),
        ));
    }
    let head = RequestHead {
        method: method.to_owned(),
        target: target.to_owned(),
        version: format!("HTTP/1.{minor}"),
        headers,
    };
    if head.count("host") > 1 {
        return Err(bad("repeated_host_header"));
    }
    if head.count("content-length") > 1 {
        return Err(bad("repeated_content_length"));
    }
    if head.count("transfer-encoding") > 0 {
        return Err(HeadError {
            status: 501,
            reason: "transfer_encoding_not_supported",
        });
    }
    Ok(head)
}

/// The body length declared by `Content-Length` (0 when absent).
pub fn content_length(head: &RequestHead) -> Result<u64, HeadError> {
    match head.header("content-length") {
        None => Ok(0),
        Some(v) if !v.is_empty() && v.len() <= 19 && v.bytes().all(|b| b.is_ascii_digit()) => {
            v.parse().map_err(|_| bad("malformed_content_length"))
        }
        Some(_) => Err(bad("malformed_content_length")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> Result<(RequestHead, Vec<u8>), HeadError> {
        read_head(&mut s.as_bytes())
    }

    #[test]
    fn parses_connect_and_keeps_early_data() {
        let (h, rest) =
            parse("CONNECT a.test:443 HTTP/1.1\r\nHost: a.test:443\r\n\r\nHELLO").unwrap();
        assert_eq!(
            (h.method.as_str(), h.target.as_str()),
            ("CONNECT", "a.test:443")
        );
        assert_eq!(h.header("HOST"), Some("a.test:443"));
        assert_eq!(rest, b"HELLO");
    }

    #[test]
    fn refuses_non_http_at_once() {
        // SOCKS5 greeting, SOCKS5 BIND / UDP ASSOCIATE, SOCKS4, a TLS ClientHello.
        for raw in [
            &b"\x05\x01\x00"[..],
            b"\x05\x02\x00\x03",
            b"\x05\x03\x00\x01",
            b"\x04\x01\x00\x50",
            b"\x16\x03\x01\x00",
        ] {
            assert_eq!(
                read_head(&mut &raw[..]).map(|_| ()).unwrap_err().reason,
                "not_http"
            );
        }
    }

    #[test]
    fn refuses_ambiguity() {
        for raw in [
            "GET http://a/ HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n",
            "GET http://a/ HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
            "POST http://a/ HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n",
            "GET http://a/ HTTP/1.1\r\nX: a\r\n folded\r\n\r\n",
            "GET http://a/ HTTP/1.1\nHost: a\r\n\r\n",
            "GET  http://a/ HTTP/1.1\r\n\r\n",
            "GET http://a/ HTTP/2\r\n\r\n",
            "GET http://a/ HTTP/1.1\r\nBad Name: x\r\n\r\n",
            "GET http://a/\x01 HTTP/1.1\r\n\r\n",
            "GET http://a/ HTTP/1.1\r\nX: a\rb\r\n\r\n",
            "GET http://a/ HTTP/1.1 \r\n\r\n",
            "GET http://a/ HTTP/1.1\r\nX: a\x7f\r\n\r\n",
            "GET http://a/ HTTP/1.1\r\n: empty name\r\n\r\n",
            "GET http://a/ HTTP/1.1\r\nNo colon here\r\n\r\n",
            "GET\thttp://a/ HTTP/1.1\r\n\r\n",
            "GET http://a/ HTTP/1.2\r\n\r\n",
            "GET http://a/ http/1.1\r\n\r\n",
            "G(T http://a/ HTTP/1.1\r\n\r\n",
        ] {
            assert!(parse(raw).is_err(), "{raw:?} accepted");
        }
        let big = format!(
            "GET http://a/ HTTP/1.1\r\nX: {}\r\n\r\n",
            "a".repeat(MAX_HEAD_BYTES + 10)
        );
        assert_eq!(parse(&big).map(|_| ()).unwrap_err().status, 431);
        let many = format!(
            "GET http://a/ HTTP/1.1\r\n{}\r\n",
            "X: a\r\n".repeat(MAX_HEADERS + 1)
        );
        assert_eq!(
            parse(&many).map(|_| ()).unwrap_err(),
            HeadError {
                status: 431,
                reason: "too_many_headers"
            }
        );
    }

    /// What is accepted keeps its exact spelling: method, target and version as sent, the
    /// headers in order, their values without surrounding blanks.
    #[test]
    fn keeps_what_was_sent() {
        let (h, rest) = parse(
            "GET http://a.test/p?q=1 HTTP/1.0\r\nHost: a.test\r\nX-Two:  v w \t\r\nx-empty:\r\n\r\n",
        )
        .unwrap();
        assert_eq!(
            (h.method.as_str(), h.target.as_str(), h.version.as_str()),
            ("GET", "http://a.test/p?q=1", "HTTP/1.0")
        );
        assert_eq!(
            h.headers,
            [
                ("Host".to_owned(), "a.test".to_owned()),
                ("X-Two".to_owned(), "v w".to_owned()),
                ("x-empty".to_owned(), String::new()),
            ]
        );
        assert!(rest.is_empty());
        let (h, _) = parse(&format!(
            "GET http://a/ HTTP/1.1\r\n{}\r\n",
            "X: a\r\n".repeat(MAX_HEADERS)
        ))
        .unwrap();
        assert_eq!(h.headers.len(), MAX_HEADERS);
    }
}
