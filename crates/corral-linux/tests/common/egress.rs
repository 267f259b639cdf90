//! The adapter from `corral-sandbox`'s [`EgressGateway`] to the real proxy
//! (`corral_egress::start`). The product's adapter lives with the runner, which may depend on
//! both; `corral-linux` may use `corral-egress` only as a dev-dependency (ADR-0030).

use std::io;
use std::net::{IpAddr, TcpListener};
use std::sync::Arc;
use std::time::Duration;

use corral_contract::Destination;
use corral_egress::{ProxyHandle, ProxyLimits, Resolve};
use corral_sandbox::{EgressGateway, EgressRecord, EgressSession};

/// Serves each attempt's in-namespace listener with `corral_egress`.
pub struct ProxyGateway {
    pub resolver: Arc<dyn Resolve>,
    pub idle_timeout: Duration,
}

struct Shared(Arc<dyn Resolve>);

impl Resolve for Shared {
    fn resolve(&self, name: &str, port: u16) -> io::Result<Vec<IpAddr>> {
        self.0.resolve(name, port)
    }
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
        let mut limits = ProxyLimits::for_wall_budget(wall);
        limits.idle_timeout = self.idle_timeout.min(wall);
        let handle = corral_egress::start(
            listener,
            allowlist.to_vec(),
            Box::new(Shared(Arc::clone(&self.resolver))),
            limits,
        )?;
        Ok(Box::new(Session(handle)))
    }
}
