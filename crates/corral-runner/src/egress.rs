//! The product's egress gateway: each allowlist attempt's in-namespace listener is served by
//! `corral_egress` with the host resolver, in the supervisor (ADR-0030).

use std::io;
use std::net::TcpListener;
use std::time::Duration;

use corral_contract::Destination;
use corral_egress::{ProxyHandle, ProxyLimits, SystemResolver};
use corral_sandbox::{EgressGateway, EgressRecord, EgressSession};

/// Serves the sandbox's proxy listener with the admitted allowlist.
#[derive(Debug, Default, Clone)]
pub struct ProxyGateway {
    /// Texts no proxied request may carry: the credential broker's placeholder (ADR-0095).
    pub refused_tokens: Vec<String>,
}

struct Session(ProxyHandle);

impl EgressSession for Session {
    fn finish(self: Box<Self>) -> Vec<EgressRecord> {
        self.0.shutdown()
    }
}

impl EgressGateway for ProxyGateway {
    fn serve(
        &self,
        listener: TcpListener,
        allowlist: &[Destination],
        wall: Duration,
    ) -> io::Result<Box<dyn EgressSession>> {
        let handle = corral_egress::start_refusing(
            listener,
            allowlist.to_vec(),
            Box::new(SystemResolver),
            ProxyLimits::for_wall_budget(wall),
            self.refused_tokens.clone(),
        )?;
        Ok(Box::new(Session(handle)))
    }
}
