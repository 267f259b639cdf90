//! `--verbose` and `--log-format json` on `run` and `probe`: what corral does, step by step,
//! with timings, as `tracing` events on stderr (stdout stays data). `RUST_LOG` is honoured and
//! turns the logs on by itself (`RUST_LOG=corral_runner=debug`).

use clap::{Args, ValueEnum};

#[derive(Args, Debug, Clone, Default)]
pub struct LogArgs {
    /// Say what corral does, step by step, with timings, on stderr.
    #[arg(short, long)]
    pub verbose: bool,
    /// The form of those logs: `text` for people, `json` (one object a line) for log shippers.
    #[arg(long, value_enum, value_name = "FORMAT", default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
}

#[derive(ValueEnum, Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum LogFormat {
    #[default]
    Text,
    Json,
}

/// corral's own crates at `info` (`--verbose` without `RUST_LOG`).
const DEFAULT_FILTER: &str = "corral_runner=info,corral_linux=info,corral_checkout=info,\
                              corral_egress=info,corral=info";

/// Installs the stderr subscriber when `--verbose` is given or `RUST_LOG` is set; returns
/// whether logs are on. A `RUST_LOG` that does not parse is said once and the default used.
pub fn init(args: &LogArgs) -> bool {
    use tracing_subscriber::EnvFilter;
    let from_env = std::env::var_os("RUST_LOG").is_some_and(|v| !v.is_empty());
    if !args.verbose && !from_env {
        return false;
    }
    let filter = if from_env {
        EnvFilter::try_from_default_env().unwrap_or_else(|e| {
            eprintln!("corral: RUST_LOG: {e}; using {DEFAULT_FILTER}");
            EnvFilter::new(DEFAULT_FILTER)
        })
    } else {
        EnvFilter::new(DEFAULT_FILTER)
    };
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .with_target(true);
    let installed = match args.log_format {
        LogFormat::Text => builder.try_init(),
        LogFormat::Json => builder.json().try_init(),
    };
    installed.is_ok()
}
