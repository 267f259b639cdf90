//! `corral`: run an untrusted coding agent without trusting it (CONTRACT.md).
//!
//! Exit codes are part of the contract: 0 success, 1 candidate rejected / attempt failed /
//! verification mismatch, 2 admission rejected or bad input, 3 sandbox capability missing.
#![forbid(unsafe_code)]

/// `println!` for stdout that survives a closed pipe ([`display::write_stdout`]).
macro_rules! out {
    () => { $crate::display::write_stdout(format_args!(""), true) };
    ($($t:tt)*) => { $crate::display::write_stdout(format_args!($($t)*), true) };
}

/// `print!` for stdout that survives a closed pipe.
macro_rules! out_raw {
    ($($t:tt)*) => { $crate::display::write_stdout(format_args!($($t)*), false) };
}

mod admit;
mod cache;
mod demo;
mod demo_agent;
mod display;
mod export;
mod input;
mod logging;
mod progress;
mod reaper;
mod run;
mod setup;
mod show;
mod summary;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Exit codes of CONTRACT.md.
pub mod exit {
    pub const OK: u8 = 0;
    pub const FAILED: u8 = 1;
    pub const REJECTED: u8 = 2;
    pub const CAPABILITY_MISSING: u8 = 3;
}

/// The contract's exit codes, shown by every `--help`.
const EXIT_CODES: &str = "Exit codes: 0 success (captured, admissible, intact); 1 candidate \
rejected, attempt failed or verification mismatch; 2 admission rejected or bad input; \
3 a sandbox capability is missing on this host.";

#[derive(Parser, Debug)]
#[command(
    name = "corral",
    version,
    about = "Run an untrusted coding agent in a kernel-enforced sandbox, fail closed."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Explain the admission decision and the SandboxPolicy it would pass.
    Admit(admit::AdmitArgs),
    /// Attest this host: each of the nine capabilities with its evidence.
    Probe(run::ProbeArgs),
    /// The whole path: admission, Linux sandbox, capture, artifacts, manifest.
    Run(run::RunArgs),
    /// Hand admitted runs to another engine: a Kubernetes Job or an OCI bundle config.
    #[command(subcommand)]
    Export(export::ExportCommand),
    /// Re-hash every artifact a manifest names.
    Verify(run::VerifyArgs),
    /// The human summary of a stored run: outcome, changes, egress, logs and the patch.
    Show(show::ShowArgs),
    /// Print a stored run's stdout (or, with --stderr, its stderr) log.
    Logs(show::LogsArgs),
    /// The base checkout cache: `ls` its entries, `gc` it down to a budget.
    #[command(subcommand)]
    Cache(cache::CacheCommand),
    /// Host set-up that needs root once: `apparmor` lets ordinary users' corral make user
    /// namespaces where AppArmor restricts them (Ubuntu 23.10 and later).
    #[command(subcommand)]
    Setup(setup::SetupCommand),
    /// Run the bundled demo agent on a tiny repository through the whole path.
    Demo,
    /// The bundled demo agent itself (what `corral demo` runs inside the sandbox).
    #[command(hide = true)]
    DemoAgent,
    /// Print a JSON Schema: work-unit, agent-preset, connections, result-manifest.
    Schema {
        /// Document name.
        #[arg(value_parser = clap::builder::PossibleValuesParser::new(
            corral_contract::schema::SCHEMA_NAMES
        ))]
        name: String,
    },
}

fn main() -> ExitCode {
    // corral re-runs itself as the confined base checkout helper (ADR-0070): dispatched
    // before anything else, with no command line parsing.
    if std::env::args_os().nth(1).as_deref()
        == Some(std::ffi::OsStr::new(corral_checkout::HELPER_ARG))
    {
        let code = corral_checkout::helper_main();
        return ExitCode::from(u8::try_from(code).unwrap_or(1));
    }
    if std::env::args_os().nth(1).as_deref()
        == Some(std::ffi::OsStr::new(corral_checkout::CAPTURE_HELPER_ARG))
    {
        let code = corral_checkout::capture_helper_main();
        return ExitCode::from(u8::try_from(code).unwrap_or(1));
    }
    // corral re-runs itself as its own reaper (ADR-0092), likewise.
    if std::env::args_os().nth(1).as_deref() == Some(std::ffi::OsStr::new(reaper::REAPER_ARG)) {
        let rest: Vec<std::ffi::OsString> = std::env::args_os().skip(2).collect();
        let code = reaper::main(&rest);
        return ExitCode::from(u8::try_from(code).unwrap_or(1));
    }
    let parsed = with_exit_codes(<Cli as clap::CommandFactory>::command())
        .try_get_matches()
        .and_then(|m| <Cli as clap::FromArgMatches>::from_arg_matches(&m));
    let cli = match parsed {
        Ok(cli) => cli,
        Err(err) => {
            // Usage errors are bad input (exit 2); --help and --version succeed.
            let code = if err.use_stderr() {
                exit::REJECTED
            } else {
                exit::OK
            };
            let _ = err.print();
            return ExitCode::from(code);
        }
    };
    // As an ordinary user, the commands that start sandboxes (and `cache`, which manages what
    // they leave, owned by the worker with subordinate ids) enter rootless mode here, while
    // corral has one thread, or keep the reason it cannot start for the probe to refuse with
    // (ADR-0080). The helpers above are corral's children and inherit the mode.
    if matches!(
        cli.command,
        Command::Probe(_) | Command::Run(_) | Command::Demo | Command::Cache(_)
    ) {
        // Its own path first: entering the mode leaves the mount namespace corral started in,
        // and where corral was that namespace's last process (a unit with PrivateTmp=, a
        // wrapper's `unshare -m`) the namespace is gone with its mounts, so /proc/self/exe
        // would name the binary only relative to its detached mount ("/target/debug/corral").
        // The path taken here resolves in the copy corral moves into.
        run::record_own_exe();
        corral_linux::rootless::choose_mode();
    }
    let code = match cli.command {
        Command::Admit(args) => admit::run(&args),
        Command::Probe(args) => run::probe(&args),
        Command::Run(args) => run::run(&args),
        Command::Verify(args) => run::verify(&args),
        Command::Show(args) => show::show(&args),
        Command::Logs(args) => show::logs(&args),
        Command::Cache(cmd) => cache::run(&cmd),
        Command::Export(cmd) => export::run(&cmd),
        Command::Setup(cmd) => setup::run(&cmd),
        Command::Demo => demo::run(),
        Command::DemoAgent => demo_agent::run(),
        Command::Schema { name } => schema(&name),
    };
    ExitCode::from(code)
}

/// Every command's `--help` ends with the exit codes.
fn with_exit_codes(cmd: clap::Command) -> clap::Command {
    cmd.after_help(EXIT_CODES).mut_subcommands(with_exit_codes)
}

fn schema(name: &str) -> u8 {
    match corral_contract::schema::schema_for_name(name) {
        Some(schema) => match corral_contract::canonical::pretty_json(&schema) {
            Ok(text) => {
                out!("{text}");
                exit::OK
            }
            Err(err) => {
                eprintln!("corral: schema {name}: {err}");
                exit::FAILED
            }
        },
        None => {
            eprintln!(
                "corral: schema: unknown document {:?} (expected one of: {})",
                display::escape(name),
                corral_contract::schema::SCHEMA_NAMES.join(", ")
            );
            exit::REJECTED
        }
    }
}
