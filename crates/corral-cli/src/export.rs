//! `corral export k8s-job` and `corral export oci` (ADR-0050): admit locally with the same
//! rules and exit codes as `corral run`, then print typed Kubernetes or OCI documents.

use std::path::{Path, PathBuf};

use clap::{Args, Subcommand};
use corral_admission::Rejected;
use corral_contract::canonical::pretty_json;
use corral_contract::{TrustedConnections, WorkUnit};
use corral_export::k8s::{JobOptions, job};
use corral_export::oci::{OciOptions, config};
use corral_export::{Admitted, ExportError};
use serde::Serialize;

use crate::admit::{field_of, file_of};
use crate::display::escape;
use crate::exit;
use crate::input::{BadInput, load};

#[derive(Subcommand, Debug)]
pub enum ExportCommand {
    /// Print a batch/v1 Job (JSON) that runs `corral run` on each admitted WorkUnit.
    K8sJob(K8sJobArgs),
    /// Print an OCI runtime bundle config.json expressing the admitted policy (weaker than
    /// `corral run`: see its dev.corral.* annotations).
    Oci(OciArgs),
}

#[derive(Args, Debug)]
pub struct Documents {
    /// A WorkUnit document. `k8s-job` takes it repeated for a batch (an Indexed Job, one
    /// index per WorkUnit); `oci` takes exactly one.
    #[arg(long = "work-unit", value_name = "FILE", required = true)]
    work_units: Vec<PathBuf>,
    /// The maintainer-owned AgentPreset.
    #[arg(long, value_name = "FILE")]
    preset: PathBuf,
    /// The trusted connections document (model_only presets).
    #[arg(long, value_name = "FILE")]
    connections: Option<PathBuf>,
}

#[derive(Args, Debug)]
pub struct K8sJobArgs {
    #[command(flatten)]
    docs: Documents,
    /// The image with `corral` on PATH and the repository, pinned: REF@sha256:<64 hex>.
    #[arg(long, value_name = "REF@sha256:HEX")]
    image: String,
    /// The pod's runtimeClassName, e.g. gvisor or kata (default: the cluster's default).
    #[arg(long, value_name = "NAME")]
    runtime_class: Option<String>,
    /// How many WorkUnits run at once.
    #[arg(long = "parallel", value_name = "N", default_value_t = 1)]
    parallel: u32,
    /// The Job's name (default: corral-<12 hex of the export's digest>).
    #[arg(long, value_name = "NAME")]
    name: Option<String>,
    /// The canonical repository inside the image (`corral run --repo`).
    #[arg(long, value_name = "PATH", default_value = "/repo")]
    repo: String,
    /// Also write the ConfigMap holding the admitted documents to FILE (the Job mounts it;
    /// apply it first).
    #[arg(long, value_name = "FILE")]
    configmap_out: Option<PathBuf>,
}

#[derive(Args, Debug)]
pub struct OciArgs {
    #[command(flatten)]
    docs: Documents,
    /// Host directory bound at /workspace (relative: to the bundle): a checkout of base_sha.
    #[arg(long, value_name = "DIR", default_value = "workspace")]
    workspace: String,
    /// root.path (relative: to the bundle): the image's root file system.
    #[arg(long, value_name = "DIR", default_value = "rootfs")]
    rootfs: String,
    /// Write DIR/config.json instead of printing it.
    #[arg(long, value_name = "DIR")]
    bundle: Option<PathBuf>,
}

pub fn run(cmd: &ExportCommand) -> u8 {
    match cmd {
        ExportCommand::K8sJob(args) => k8s_job(args),
        ExportCommand::Oci(args) => oci(args),
    }
}

/// Loads and admits every document; prints each problem as one line and returns exit 2.
fn admitted(docs: &Documents) -> Result<Admitted, u8> {
    let wus: Vec<Result<WorkUnit, BadInput>> = docs
        .work_units
        .iter()
        .map(|p| load::<WorkUnit>(p))
        .collect();
    let preset = crate::input::load_preset(&docs.preset);
    let conn = docs
        .connections
        .as_ref()
        .map(|c| load::<TrustedConnections>(c))
        .transpose();
    let mut bad: Vec<&BadInput> = wus.iter().filter_map(|r| r.as_ref().err()).collect();
    bad.extend(preset.as_ref().err());
    bad.extend(conn.as_ref().err());
    if !bad.is_empty() {
        for BadInput(line) in bad {
            eprintln!("corral: {line}");
        }
        return Err(exit::REJECTED);
    }
    let (Ok(preset), Ok(conn)) = (preset, conn) else {
        return Err(exit::REJECTED);
    };
    let wus: Vec<WorkUnit> = wus.into_iter().flatten().collect();
    Admitted::admit(wus, preset, conn).map_err(|rejected| {
        for (i, Rejected(rs)) in &rejected {
            let wu: &Path = docs.work_units.get(*i).map_or(Path::new(""), |p| p);
            for r in rs {
                eprintln!(
                    "corral: rejected: {}: {}: {} [{}]",
                    file_of(r, wu, &docs.preset, docs.connections.as_ref()),
                    field_of(r),
                    escape(&r.detail),
                    r.code
                );
            }
        }
        exit::REJECTED
    })
}

/// Indented JSON with a final newline, keys sorted, strings spelled as canonical JSON spells
/// them (no raw bidi, C1 or other invisible code point: a hostile WorkUnit's text inside the
/// ConfigMap stays visible as `\uXXXX`). For ASCII text, the bytes of
/// `corral_export::to_json_pretty` (the golden files).
fn to_json_pretty<T: Serialize>(value: &T, what: &'static str) -> Result<String, ExportError> {
    let mut text = pretty_json(value).map_err(|e| ExportError::Serialize {
        what,
        message: e.to_string(),
    })?;
    text.push('\n');
    Ok(text)
}

fn report(e: &ExportError) -> u8 {
    match e {
        ExportError::BadOption { .. } => {
            eprintln!("corral: {}", escape(&e.to_string()));
            exit::REJECTED
        }
        ExportError::Serialize { .. } => {
            eprintln!("corral: internal error: {}", escape(&e.to_string()));
            exit::FAILED
        }
    }
}

fn k8s_job(args: &K8sJobArgs) -> u8 {
    let batch = match admitted(&args.docs) {
        Ok(b) => b,
        Err(code) => return code,
    };
    let opts = JobOptions {
        image: args.image.clone(),
        runtime_class: args.runtime_class.clone(),
        parallelism: args.parallel,
        name: args.name.clone(),
        repo: args.repo.clone(),
    };
    let export = match job(&batch, &opts) {
        Ok(e) => e,
        Err(e) => return report(&e),
    };
    let (job_text, cm_text) = match (
        to_json_pretty(&export.job, "Job"),
        to_json_pretty(&export.config_map, "ConfigMap"),
    ) {
        (Ok(j), Ok(c)) => (j, c),
        (Err(e), _) | (_, Err(e)) => return report(&e),
    };
    if let Some(path) = &args.configmap_out
        && let Err(e) = std::fs::write(path, cm_text)
    {
        eprintln!(
            "corral: {}: cannot write: {e}",
            escape(&path.display().to_string())
        );
        return exit::FAILED;
    }
    out_raw!("{job_text}");
    exit::OK
}

fn oci(args: &OciArgs) -> u8 {
    if args.docs.work_units.len() != 1 {
        eprintln!("corral: --work-unit: an OCI bundle runs exactly one WorkUnit");
        return exit::REJECTED;
    }
    let batch = match admitted(&args.docs) {
        Ok(b) => b,
        Err(code) => return code,
    };
    let opts = OciOptions {
        workspace: args.workspace.clone(),
        rootfs: args.rootfs.clone(),
    };
    let text = match config(&batch, &opts).and_then(|s| to_json_pretty(&s, "OCI config")) {
        Ok(t) => t,
        Err(e) => return report(&e),
    };
    match &args.bundle {
        None => {
            out_raw!("{text}");
            exit::OK
        }
        Some(dir) => {
            let shown = escape(&dir.display().to_string());
            if let Err(e) = std::fs::create_dir_all(dir)
                .and_then(|()| std::fs::write(dir.join("config.json"), text))
            {
                eprintln!("corral: {shown}: cannot write config.json: {e}");
                return exit::FAILED;
            }
            out!("{shown}/config.json");
            exit::OK
        }
    }
}
