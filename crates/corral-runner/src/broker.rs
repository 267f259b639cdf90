//! The product's model gateway (ADR-0095): a preset whose trusted connection names an
//! `upstream` gets corral's credential broker as its model endpoint. The real credential is
//! read here, in corral, when the run starts (a host file or corral's own environment, never
//! a WorkUnit field) and handed only to the broker, outside the sandbox.

use std::io::{self, Read as _};
use std::net::TcpListener;
use std::sync::Arc;
use std::time::Duration;

use corral_admission::upstream::parse_base_url;
use corral_contract::documents::{CredentialSource, ModelUpstream};
use corral_egress::SystemResolver;
use corral_egress::broker::{self, BrokerBudgets, BrokerConfig, BrokerHandle, Secret, Upstream};
use corral_sandbox::{ModelCalls, ModelGateway, ModelSession, model_endpoint_url};

/// The largest credential file read (a key is tens of bytes; a token a few KiB).
const MAX_CREDENTIAL_BYTES: u64 = 64 << 10;
/// The largest CA file read.
const MAX_CA_BYTES: u64 = 4 << 20;

/// Serves one run's model endpoint.
pub struct BrokerGateway {
    config: BrokerConfig,
    token: String,
}

impl std::fmt::Debug for BrokerGateway {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BrokerGateway")
            .field("upstream", &self.config.upstream)
            .finish_non_exhaustive()
    }
}

fn read_bounded(path: &str, max: u64, what: &str) -> Result<Vec<u8>, String> {
    let file = std::fs::File::open(path).map_err(|e| format!("{what} {path}: {e}"))?;
    if !file
        .metadata()
        .map_err(|e| format!("{what} {path}: {e}"))?
        .is_file()
    {
        return Err(format!("{what} {path}: not a regular file"));
    }
    let mut bytes = Vec::new();
    file.take(max + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("{what} {path}: {e}"))?;
    if bytes.len() as u64 > max {
        return Err(format!("{what} {path}: larger than {max} bytes"));
    }
    Ok(bytes)
}

impl BrokerGateway {
    /// The gateway for connection `name`'s upstream: reads the credential and the CA file and
    /// makes the run's placeholder token. Each failure names the connection field and file.
    pub fn for_run(name: &str, u: &ModelUpstream) -> Result<Self, String> {
        let at = format!("connections.{name}.upstream");
        let base = parse_base_url(&u.base_url).map_err(|why| format!("{at}.base_url: {why}"))?;
        let credential = match &u.credential {
            CredentialSource::None => None,
            CredentialSource::File(path) => {
                let bytes = read_bounded(path, MAX_CREDENTIAL_BYTES, "credential file")
                    .map_err(|e| format!("{at}.credential: {e}"))?;
                let text = String::from_utf8(bytes)
                    .map_err(|_| format!("{at}.credential: {path} is not UTF-8 text"))?;
                Some(Secret::new(&text).ok_or_else(|| {
                    format!("{at}.credential: {path} is empty or holds a line break or control character inside")
                })?)
            }
            CredentialSource::Env(var) => {
                let text = std::env::var(var).map_err(|_| {
                    format!("{at}.credential: {var} is not set in corral's environment (set it, or name a credential file)")
                })?;
                Some(Secret::new(&text).ok_or_else(|| {
                    format!("{at}.credential: {var} is empty or holds a control character")
                })?)
            }
        };
        let tls = match &u.ca_file {
            Some(path) => {
                let pem = read_bounded(path, MAX_CA_BYTES, "CA file")
                    .map_err(|e| format!("{at}.ca_file: {e}"))?;
                broker::tls_config(Some((path, &pem)))
            }
            None => broker::tls_config(None),
        }
        .map_err(|e| format!("{at}: {e}"))?;
        let token =
            broker::placeholder_token().map_err(|e| format!("the run's model token: {e}"))?;
        let with_scheme = |v: &str| {
            if u.credential_scheme.is_empty() {
                v.to_owned()
            } else {
                format!("{} {v}", u.credential_scheme)
            }
        };
        let b = &u.budgets;
        let config = BrokerConfig {
            upstream: Upstream {
                host: base.destination.host.clone(),
                port: base.destination.port,
                base_path: base.base_path,
            },
            methods: u.methods.clone(),
            path_prefixes: u.path_prefixes.clone(),
            credential_header: u.credential_header.clone(),
            placeholder_value: with_scheme(&token),
            credential_value: match credential {
                Some(c) => Secret::new(&with_scheme(c.expose())),
                None => None,
            },
            tls,
            budgets: BrokerBudgets {
                calls: b.calls,
                request_bytes: b.request_bytes,
                response_bytes: b.response_bytes,
                call_time: Duration::from_secs(b.call_seconds),
                total_time: Duration::from_secs(b.total_seconds),
            },
            max_connections: 16,
            head_timeout: Duration::from_secs(10),
            connect_timeout: Duration::from_secs(10),
        };
        Ok(Self { config, token })
    }
}

impl BrokerGateway {
    /// The run's placeholder token (what `{model_token}` becomes).
    #[must_use]
    pub fn token(&self) -> &str {
        &self.token
    }
}

struct Session(BrokerHandle);

impl ModelSession for Session {
    fn finish(self: Box<Self>) -> ModelCalls {
        let (calls, unrecorded) = self.0.shutdown_counted();
        ModelCalls { calls, unrecorded }
    }
}

impl ModelGateway for BrokerGateway {
    fn serve(&self, listener: TcpListener, wall: Duration) -> io::Result<Box<dyn ModelSession>> {
        let mut config = self.config.clone();
        // Nothing outlives the run.
        config.budgets.total_time = config.budgets.total_time.min(wall);
        config.tls = Arc::clone(&self.config.tls);
        let handle = broker::start(listener, config, Box::new(SystemResolver))?;
        Ok(Box::new(Session(handle)))
    }

    fn placeholders(&self) -> Vec<(String, String)> {
        vec![
            ("{model_base_url}".to_owned(), model_endpoint_url()),
            ("{model_token}".to_owned(), self.token.clone()),
        ]
    }
}
