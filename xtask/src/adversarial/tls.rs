//! NET-16's model upstream: a TLS server on the host's loopback with a fresh test CA, the
//! shape of a chat-completions API, keeping each request's head (ADR-0095).

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context as _, Result};

/// A listener on `127.0.0.1:0`, the CA's PEM, and the server configuration.
pub fn server() -> Result<(TcpListener, String, Arc<rustls::ServerConfig>)> {
    use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, IsCa, KeyPair};
    let mut ca = CertificateParams::new(Vec::<String>::new())?;
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca = CertifiedIssuer::self_signed(ca, KeyPair::generate()?)?;
    let key = KeyPair::generate()?;
    let cert = CertificateParams::new(vec!["127.0.0.1".to_owned()])?.signed_by(&key, &ca)?;
    let config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::aws_lc_rs::default_provider(),
    ))
    .with_safe_default_protocol_versions()?
    .with_no_client_auth()
    .with_single_cert(
        vec![cert.der().clone()],
        rustls::pki_types::PrivateKeyDer::Pkcs8(key.serialize_der().into()),
    )?;
    let listener = TcpListener::bind("127.0.0.1:0").context("bind the model upstream")?;
    Ok((listener, ca.pem(), Arc::new(config)))
}

/// Serves one connection: reads one request (head and `Content-Length` body), keeps the
/// head, answers `answer(n)` as JSON.
pub fn serve_one(
    stream: TcpStream,
    config: &Arc<rustls::ServerConfig>,
    seen: &Mutex<Vec<String>>,
    answer: fn(usize) -> String,
) {
    let _ = stream.set_nonblocking(false);
    let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
    let Ok(conn) = rustls::ServerConnection::new(Arc::clone(config)) else {
        return;
    };
    let mut tls = rustls::StreamOwned::new(conn, stream);
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    let end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        match tls.read(&mut chunk) {
            Ok(0) | Err(_) => return,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    };
    let head = String::from_utf8_lossy(&buf[..end]).into_owned();
    let len: usize = head
        .lines()
        .find_map(|l| {
            l.to_ascii_lowercase()
                .strip_prefix("content-length:")
                .and_then(|v| v.trim().parse().ok())
        })
        .unwrap_or(0);
    while buf.len() < end + len {
        match tls.read(&mut chunk) {
            Ok(0) | Err(_) => break,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
    let n = match seen.lock() {
        Ok(mut seen) => {
            seen.push(head);
            seen.len()
        }
        Err(_) => return,
    };
    let body = answer(n);
    let _ = tls.write_all(
        format!(
            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        )
        .as_bytes(),
    );
    let _ = tls.flush();
    tls.conn.send_close_notify();
    let _ = tls.flush();
}
