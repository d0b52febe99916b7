//! Which image URLs may reach an engine: `data:image/...` URLs, and `http(s)` URLs whose host is
//! a public name or address. An engine that fetches a URL does so from inside the operator's
//! network, so a client must not point it at files (`file://`), other protocols (`gopher://`),
//! the machine itself, private networks or cloud metadata addresses (link-local).
//!
//! Host names are checked as written (no DNS lookup here): `localhost` and names under it are
//! refused, and so is any host written as a number in a form other than four decimal parts
//! (`2130706433`, `0x7f.1`, `127.1`), which fetchers would read as an address.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use crate::ProtocolError;

/// `Ok` when the engine may be given `url`; otherwise a 400 naming `param` and why.
pub fn check(param: &str, url: &str) -> Result<(), ProtocolError> {
    let refuse = |why: &str| Err(ProtocolError::new(param, format!("image URL refused: {why}")));
    if url.chars().any(|c| c.is_control() || c.is_whitespace() || c == '\\') {
        return refuse("it contains spaces, control characters or backslashes");
    }
    let Some((scheme, rest)) = url.split_once(':') else {
        return refuse("send an https:// URL or a data:image/... URL");
    };
    match scheme.to_ascii_lowercase().as_str() {
        "data" => {
            if rest.get(..6).is_some_and(|p| p.eq_ignore_ascii_case("image/")) {
                Ok(())
            } else {
                refuse("a data: URL must hold an image (data:image/png;base64,...)")
            }
        }
        "http" | "https" => {
            let Some(after) = rest.strip_prefix("//") else {
                return refuse("an http(s) URL needs a host (https://host/path)");
            };
            let authority = after.split(['/', '?', '#']).next().unwrap_or_default();
            if authority.contains('@') {
                return refuse("credentials in image URLs are not accepted");
            }
            match host_of(authority) {
                Some(host) => check_host(&host).or_else(&refuse),
                None => refuse("the URL's host or port is malformed"),
            }
        }
        other => refuse(&format!(
            "the `{other}` scheme is not accepted; send an https:// URL or a data:image/... URL"
        )),
    }
}

/// The host of `host[:port]` or `[v6]:port`, lower-cased; `None` when malformed.
fn host_of(authority: &str) -> Option<String> {
    let (host, port) = if let Some(v6) = authority.strip_prefix('[') {
        let (h, rest) = v6.split_once(']')?;
        (h, rest.strip_prefix(':'))
    } else {
        match authority.split_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (authority, None),
        }
    };
    if let Some(p) = port {
        if !p.is_empty() && (!p.bytes().all(|b| b.is_ascii_digit()) || p.parse::<u16>().is_err()) {
            return None;
        }
    }
    if host.is_empty() || host.contains('%') {
        return None;
    }
    Some(host.trim_end_matches('.').to_ascii_lowercase())
}

fn check_host(host: &str) -> Result<(), &'static str> {
    if host == "localhost" || host.ends_with(".localhost") {
        return Err("the host is this machine");
    }
    if let Ok(ip) = host.parse::<Ipv6Addr>() {
        return check_ip(IpAddr::V6(ip));
    }
    let last = host.rsplit('.').next().unwrap_or(host);
    let numeric = !last.is_empty() && (last.bytes().all(|b| b.is_ascii_digit()) || last.starts_with("0x"));
    if !numeric {
        return Ok(()); // a name: its top-level label is never a number
    }
    match host.parse::<Ipv4Addr>() {
        Ok(ip) => check_ip(IpAddr::V4(ip)),
        Err(_) => Err("write an IPv4 address as four decimal numbers (a.b.c.d)"),
    }
}

fn check_ip(ip: IpAddr) -> Result<(), &'static str> {
    const WHY: &str = "the address is not public (loopback, private, link-local or reserved)";
    let v4_public = |a: Ipv4Addr| {
        let [x, y, z, _] = a.octets();
        !(a.is_unspecified()
            || a.is_loopback()
            || a.is_private()
            || a.is_link_local()
            || a.is_broadcast()
            || a.is_multicast()
            || a.is_documentation()
            || x == 0
            || x >= 240
            || (x == 100 && (64..128).contains(&y)) // carrier-grade NAT
            || (x == 192 && y == 0 && z == 0)) // IETF protocol assignments
    };
    let public = match ip {
        IpAddr::V4(a) => v4_public(a),
        IpAddr::V6(a) => {
            let seg = a.segments();
            let embedded = a.to_ipv4_mapped().or_else(|| {
                // NAT64 (64:ff9b::/96) and the deprecated IPv4-compatible form (::a.b.c.d).
                let nat64 = seg[..6] == [0x64, 0xff9b, 0, 0, 0, 0];
                let compat = seg[..6] == [0, 0, 0, 0, 0, 0];
                (nat64 || compat).then(|| {
                    let [.., a, b, c, d] = a.octets();
                    Ipv4Addr::new(a, b, c, d)
                })
            });
            match embedded {
                Some(v4) => v4_public(v4),
                None => {
                    !(a.is_unspecified()
                        || a.is_loopback()
                        || a.is_multicast()
                        || (seg[0] & 0xfe00) == 0xfc00 // unique local
                        || (seg[0] & 0xffc0) == 0xfe80 // link-local
                        || (seg[0] & 0xffc0) == 0xfec0 // site-local
                        || (seg[0] == 0x2001 && seg[1] == 0x0db8)) // documentation
                }
            }
        }
    };
    if public {
        Ok(())
    } else {
        Err(WHY)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn public_urls_and_image_data_pass() {
        for url in [
            "https://example.com/a.png",
            "http://images.example.org:8080/x?y=1#z",
            "https://93.184.216.34/a.png",
            "https://[2606:2800:220:1:248:1893:25c8:1946]/a.png",
            "data:image/png;base64,iVBORw0KGgo=",
            "HTTPS://Example.COM./a.png",
        ] {
            assert!(check("p", url).is_ok(), "{url}");
        }
    }

    #[test]
    fn other_schemes_and_inner_addresses_are_refused() {
        for url in [
            "file:///etc/passwd",
            "gopher://example.com/",
            "ftp://example.com/a.png",
            "data:text/plain,hi",
            "data:,x",
            "http://localhost/a.png",
            "http://api.localhost/a.png",
            "http://127.0.0.1:8000/health",
            "http://169.254.169.254/latest/meta-data/",
            "http://10.0.0.1/",
            "http://192.168.1.1/",
            "http://172.16.5.4/",
            "http://100.64.0.1/",
            "http://0.0.0.0/",
            "http://[::1]/",
            "http://[fe80::1]/",
            "http://[fd00::1]/",
            "http://[::ffff:127.0.0.1]/",
            "http://[64:ff9b::a9fe:a9fe]/",
            "http://2130706433/",
            "http://0x7f.1/",
            "http://127.1/",
            "http://user:pw@example.com/",
            "http://example.com\\@127.0.0.1/",
            "http://%31%32%37.0.0.1/",
            "http://example.com:99999/",
            "https:/example.com",
            "example.com/a.png",
        ] {
            let Err(e) = check("messages[0].content[1]", url) else {
                panic!("{url} passed")
            };
            assert_eq!(e.param.as_deref(), Some("messages[0].content[1]"), "{url}");
            assert!(e.message.starts_with("image URL refused"), "{url}: {}", e.message);
        }
    }
}
