//! Which resolved addresses a listed DNS name may never open.
//!
//! A name on the allowlist only opens public addresses. Loopback, private, shared (CGNAT),
//! link-local (and so the metadata service), unique-local, unspecified, multicast, broadcast and
//! reserved ranges are refused, as are IPv6 forms that embed such an IPv4 address
//! (IPv4-mapped, NAT64, 6to4) and tunnels (Teredo). An IP literal the allowlist names itself is
//! the only way to reach such an address (CONTRACT.md).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// The reason an address is refused, or `None` for a public address.
#[must_use]
pub fn refused_reason(ip: IpAddr) -> Option<&'static str> {
    match ip {
        IpAddr::V4(v4) => refused_v4(v4),
        IpAddr::V6(v6) => refused_v6(v6),
    }
}

fn refused_v4(ip: Ipv4Addr) -> Option<&'static str> {
    let [a, b, ..] = ip.octets();
    if ip == Ipv4Addr::new(169, 254, 169, 254) {
        return Some("metadata_address");
    }
    if ip.is_loopback() {
        return Some("loopback_address");
    }
    if ip.is_private() {
        return Some("private_address");
    }
    if a == 100 && (64..128).contains(&b) {
        return Some("shared_address");
    }
    if ip.is_link_local() {
        return Some("link_local_address");
    }
    if a == 0 {
        return Some("unspecified_address");
    }
    if ip.is_multicast() {
        return Some("multicast_address");
    }
    if ip.is_broadcast() || a >= 240 {
        return Some("reserved_address");
    }
    if a == 192 && b == 0 && ip.octets()[2] == 0 {
        return Some("reserved_address");
    }
    None
}

fn refused_v6(ip: Ipv6Addr) -> Option<&'static str> {
    let seg = ip.segments();
    if ip == Ipv6Addr::new(0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x254) {
        return Some("metadata_address");
    }
    if ip.is_loopback() {
        return Some("loopback_address");
    }
    if ip.is_unspecified() {
        return Some("unspecified_address");
    }
    if let Some(v4) = ip.to_ipv4_mapped() {
        return refused_v4(v4).or(Some("ipv4_mapped_address"));
    }
    // IPv4-compatible (deprecated) ::a.b.c.d
    if seg[..6] == [0; 6] {
        return Some("reserved_address");
    }
    // NAT64 well-known prefix 64:ff9b::/96 and local-use 64:ff9b:1::/48.
    if seg[0] == 0x64 && seg[1] == 0xff9b {
        return Some("nat64_address");
    }
    // 6to4 2002::/16 embeds an IPv4 address; Teredo 2001::/32 tunnels.
    if seg[0] == 0x2002 {
        return Some("6to4_address");
    }
    if seg[0] == 0x2001 && seg[1] == 0 {
        return Some("teredo_address");
    }
    if (seg[0] & 0xfe00) == 0xfc00 {
        return Some("unique_local_address");
    }
    if (seg[0] & 0xffc0) == 0xfe80 {
        return Some("link_local_address");
    }
    if (seg[0] & 0xffc0) == 0xfec0 {
        return Some("site_local_address");
    }
    if (seg[0] & 0xff00) == 0xff00 {
        return Some("multicast_address");
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_every_non_public_range() {
        for ip in [
            "127.0.0.1",
            "127.255.0.1",
            "10.77.0.5",
            "172.16.0.1",
            "172.31.255.255",
            "192.168.1.1",
            "100.64.0.1",
            "100.127.255.255",
            "169.254.169.254",
            "169.254.0.1",
            "0.0.0.0",
            "0.1.2.3",
            "224.0.0.1",
            "255.255.255.255",
            "240.0.0.1",
            "::1",
            "::",
            "::ffff:127.0.0.1",
            "::ffff:169.254.169.254",
            "::ffff:7f00:1",
            "fd00:ec2::254",
            "fd00:77::10",
            "fc00::1",
            "fe80::1",
            "fec0::1",
            "ff02::1",
            "64:ff9b::a9fe:a9fe",
            "2002:a9fe:a9fe::",
            "2001::1",
            "::127.0.0.1",
        ] {
            let ip: IpAddr = ip.parse().unwrap();
            assert!(refused_reason(ip).is_some(), "{ip} allowed");
        }
        assert_eq!(
            refused_reason("169.254.169.254".parse().unwrap()),
            Some("metadata_address")
        );
        assert_eq!(
            refused_reason("fd00:ec2::254".parse().unwrap()),
            Some("metadata_address")
        );
    }

    #[test]
    fn public_addresses_pass() {
        for ip in [
            "198.18.0.10",
            "93.184.216.34",
            "1.1.1.1",
            "2606:4700::1111",
            "172.32.0.1",
            "100.128.0.1",
        ] {
            let ip: IpAddr = ip.parse().unwrap();
            assert_eq!(refused_reason(ip), None, "{ip}");
        }
    }
}
