//! Destination parsing: accepted destinations have exactly one spelling (parse(display(d)) ==
//! d), are lower case, and never an ambiguous numeric host.
#![no_main]

use corral_contract::{Destination, Host};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(s) = std::str::from_utf8(data) else { return };
    if let Ok(d) = Destination::parse(s) {
        let text = d.to_string();
        assert_eq!(Destination::parse(&text), Ok(d.clone()));
        assert_eq!(text, text.to_ascii_lowercase());
        assert!(d.port != 0);
        if let Host::Dns(name) = &d.host {
            assert!(!name.ends_with('.'));
            assert!(name.parse::<std::net::Ipv4Addr>().is_err());
            let last = name.rsplit('.').next().unwrap_or("");
            assert!(!last.chars().all(|c| c.is_ascii_digit()), "numeric last label accepted: {name}");
        }
    }
});
