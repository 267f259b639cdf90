//! `RawProcessExecutor`: runs the worker as a plain host process with
//! [`corral_process::run_bounded_process`]. It attests **nothing**, so the capability gate
//! always refuses it. It exists only to prove the gate: a test shows it never runs a worker.

use std::ffi::OsString;
use std::time::Duration;

use corral_contract::SandboxCapabilities;
use corral_contract::manifest::Termination;
use corral_process::{BoundedCommand, ProcessExit, run_bounded_process};

use crate::{AttestedRequest, CancelToken, LocalSandboxExecutor, SandboxError, SandboxOutcome};

/// A plain subprocess runner with no isolation. Never a sandbox.
#[derive(Debug, Default, Clone, Copy)]
pub struct RawProcessExecutor;

const NOT_A_SANDBOX: &str =
    "raw host process (run_bounded_process): not a sandbox, nothing is enforced";

impl LocalSandboxExecutor for RawProcessExecutor {
    fn backend(&self) -> &str {
        "raw-process"
    }

    fn capabilities(&self) -> SandboxCapabilities {
        SandboxCapabilities::none(NOT_A_SANDBOX)
    }

    fn execute(
        &self,
        request: &AttestedRequest<'_>,
        _cancel: &CancelToken,
    ) -> Result<SandboxOutcome, SandboxError> {
        // Unreachable in practice: the gate refuses an executor that attests nothing.
        let exec = request.exec();
        let mut cmd = BoundedCommand::new(&exec.executable);
        cmd.args = exec.args.iter().map(OsString::from).collect();
        cmd.env = exec.env.iter().map(|(k, v)| (k.into(), v.into())).collect();
        cmd.stdin.clone_from(&exec.stdin);
        cmd.wall_timeout = Duration::from_secs(request.limits().wall_seconds.get());
        cmd.max_output_bytes = request.limits().max_output_bytes.get();
        let out = run_bounded_process(&cmd)?;
        let (termination, exit_code, signal) = match out.exit {
            ProcessExit::Exited(c) => (Termination::Exited, Some(c), None),
            ProcessExit::Signaled(s) => (Termination::Signaled, None, Some(s)),
            ProcessExit::TimedOut => (Termination::WallTimeout, None, None),
        };
        Ok(SandboxOutcome {
            backend: self.backend().to_owned(),
            capabilities: self.capabilities(),
            termination,
            exit_code,
            signal,
            wall_ms: u64::try_from(out.wall.as_millis()).unwrap_or(u64::MAX),
            cpu_ms: 0,
            peak_memory_bytes: 0,
            cpu_cap_millicores: None,
            stdout: out.stdout,
            stderr: out.stderr,
            workspace: None,
            notes: vec![NOT_A_SANDBOX.to_owned()],
            egress: Vec::new(),
            model_calls: crate::ModelCalls::default(),
        })
    }
}
