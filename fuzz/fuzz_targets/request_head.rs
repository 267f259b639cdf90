//! The proxy's request head parser (`corral_egress::http::read_head`): what it accepts is
//! unambiguous and has one reading. Every accepted head has a token method, an HTTP/1.0 or
//! 1.1 version, no CR, LF or other control character in its target or any header, at most one
//! `Host` and `Content-Length`, no `Transfer-Encoding`; written back out in its canonical form
//! it parses to the same head; and the bytes after the head are exactly what followed it.
#![no_main]

use corral_egress::http::{MAX_HEAD_BYTES, read_head};
use libfuzzer_sys::fuzz_target;

fn tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

fuzz_target!(|data: &[u8]| {
    let Ok((head, rest)) = read_head(&mut &data[..]) else {
        return;
    };
    assert!(!head.method.is_empty() && head.method.bytes().all(tchar));
    assert!(head.version == "HTTP/1.1" || head.version == "HTTP/1.0");
    assert!(!head.target.is_empty());
    assert!(!head.target.bytes().any(|b| b <= b' ' || b == 0x7f));
    let count = |n: &str| {
        head.headers
            .iter()
            .filter(|(k, _)| k.eq_ignore_ascii_case(n))
            .count()
    };
    assert!(count("host") <= 1 && count("content-length") <= 1);
    assert_eq!(count("transfer-encoding"), 0);
    let mut canonical = format!("{} {} {}\r\n", head.method, head.target, head.version);
    for (name, value) in &head.headers {
        assert!(!name.is_empty() && name.bytes().all(tchar));
        assert!(!value.bytes().any(|b| (b < b' ' && b != b'\t') || b == 0x7f));
        assert!(!value.starts_with([' ', '\t']) && !value.ends_with([' ', '\t']));
        canonical.push_str(&format!("{name}: {value}\r\n"));
    }
    canonical.push_str("\r\n");
    let end = data
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("a head ends with a blank line");
    assert!(end <= MAX_HEAD_BYTES);
    assert!(data[end + 4..].starts_with(&rest));
    let (again, none) = read_head(&mut canonical.as_bytes()).expect("the canonical form parses");
    assert_eq!(again, head);
    assert!(none.is_empty());
});
