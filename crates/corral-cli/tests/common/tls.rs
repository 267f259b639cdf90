//! A TLS model upstream on the host's loopback with a test CA, for the credential broker's
//! end-to-end tests (`broker.rs`, `real_agents.rs`) and the `agent_overhead` bench, and the same
//! model in plain HTTP.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};

/// Serves model calls: `answer(n, body)` gives the n-th request's answer (from 1): JSON, or
/// server-sent events when it starts with `event: ` or `data: `.
/// Returns the port, the test CA's PEM and each request's head as it arrived.
pub fn upstream(
    answer: impl Fn(usize, &str) -> String + Send + Sync + 'static,
) -> (u16, String, Arc<Mutex<Vec<String>>>) {
    use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, IsCa, KeyPair};
    let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca = CertifiedIssuer::self_signed(ca, KeyPair::generate().unwrap()).unwrap();
    let key = KeyPair::generate().unwrap();
    let cert = CertificateParams::new(vec!["127.0.0.1".to_owned()])
        .unwrap()
        .signed_by(&key, &ca)
        .unwrap();
    let config = Arc::new(
        rustls::ServerConfig::builder_with_provider(Arc::new(
            rustls::crypto::aws_lc_rs::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(
            vec![cert.der().clone()],
            rustls::pki_types::PrivateKeyDer::Pkcs8(key.serialize_der().into()),
        )
        .unwrap(),
    );
    let (port, seen) = serve(answer, move |stream| {
        let conn = rustls::ServerConnection::new(Arc::clone(&config)).unwrap();
        Box::new(rustls::StreamOwned::new(conn, stream))
    });
    (port, ca.pem(), seen)
}

/// The same scripted upstream in plain HTTP (the bench's agent run without corral).
pub fn plain_upstream(
    answer: impl Fn(usize, &str) -> String + Send + Sync + 'static,
) -> (u16, Arc<Mutex<Vec<String>>>) {
    serve(answer, |stream| Box::new(stream))
}

trait Stream: Read + Write + Send {
    /// Ends the answer (TLS: close_notify, so the client sees a clean end).
    fn close(&mut self) {}
}
impl Stream for TcpStream {}
impl Stream for rustls::StreamOwned<rustls::ServerConnection, TcpStream> {
    fn close(&mut self) {
        self.conn.send_close_notify();
        let _ = self.flush();
    }
}

fn serve(
    answer: impl Fn(usize, &str) -> String + Send + Sync + 'static,
    wrap: impl Fn(TcpStream) -> Box<dyn Stream> + Send + Sync + 'static,
) -> (u16, Arc<Mutex<Vec<String>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let s2 = Arc::clone(&seen);
    let answer = Arc::new(answer);
    let wrap = Arc::new(wrap);
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let (seen, answer, wrap) = (Arc::clone(&s2), Arc::clone(&answer), Arc::clone(&wrap));
            std::thread::spawn(move || {
                let mut s = wrap(stream);
                let mut buf = Vec::new();
                let mut chunk = [0u8; 4096];
                let end = loop {
                    if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                        break i + 4;
                    }
                    match s.read(&mut chunk) {
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
                            .map(|v| v.trim().parse().unwrap())
                    })
                    .unwrap_or(0);
                while buf.len() < end + len {
                    match s.read(&mut chunk) {
                        Ok(0) | Err(_) => break,
                        Ok(n) => buf.extend_from_slice(&chunk[..n]),
                    }
                }
                let n = {
                    let mut seen = seen.lock().unwrap();
                    seen.push(head);
                    seen.len()
                };
                let body = answer(n, &String::from_utf8_lossy(&buf[end..]));
                // A streamed answer (the Responses API's server-sent events) or JSON.
                let kind = if body.starts_with("event: ") || body.starts_with("data: ") {
                    "text/event-stream"
                } else {
                    "application/json"
                };
                let _ = s.write_all(
                    format!(
                        "HTTP/1.1 200 OK\r\nContent-Type: {kind}\r\nContent-Length: {}\r\n\r\n{body}",
                        body.len()
                    )
                    .as_bytes(),
                );
                let _ = s.flush();
                s.close();
            });
        }
    });
    (port, seen)
}
