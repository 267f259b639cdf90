//! `corral admit`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use clap::Args;
use corral_admission::{Rejected, admit};
use corral_contract::reports::{AdmissionReport, DocumentRef};
use corral_contract::{AgentPreset, Rejection, TrustedConnections, WorkUnit, digest_of};

use crate::display::{escape, print_json};
use crate::exit;
use crate::input::{BadInput, load};

#[derive(Args, Debug)]
pub struct AdmitArgs {
    /// The WorkUnit document.
    #[arg(long, value_name = "FILE")]
    work_unit: PathBuf,
    /// The maintainer-owned AgentPreset.
    #[arg(long, value_name = "FILE")]
    preset: PathBuf,
    /// The maintainer-owned trusted connections document (model_only presets).
    #[arg(long, value_name = "FILE")]
    connections: Option<PathBuf>,
    /// Print the decision as JSON on stdout.
    #[arg(long)]
    json: bool,
}

/// Documents of one admission, loaded.
pub struct Inputs {
    pub work_unit: WorkUnit,
    pub preset: AgentPreset,
    pub connections: Option<TrustedConnections>,
}

/// Loads all documents, reporting every unreadable one (not just the first).
pub fn load_inputs(
    work_unit: &Path,
    preset: &Path,
    connections: Option<&PathBuf>,
) -> Result<Inputs, Vec<BadInput>> {
    let wu = load::<WorkUnit>(work_unit);
    let pr = crate::input::load_preset(preset);
    let conn = connections
        .map(|c| load::<TrustedConnections>(c))
        .transpose();
    match (wu, pr, conn) {
        (Ok(work_unit), Ok(preset), Ok(connections)) => Ok(Inputs {
            work_unit,
            preset,
            connections,
        }),
        (wu, pr, conn) => Err([wu.err(), pr.err(), conn.err()]
            .into_iter()
            .flatten()
            .collect()),
    }
}

/// The file a rejection's field belongs to.
pub fn file_of(
    r: &Rejection,
    work_unit: &Path,
    preset: &Path,
    connections: Option<&PathBuf>,
) -> String {
    let field = r.path.as_deref().unwrap_or("");
    let file = if field.starts_with("work_unit.") {
        work_unit.display().to_string()
    } else if field.starts_with("preset.") {
        preset.display().to_string()
    } else if field.starts_with("connections.") {
        connections.map_or_else(|| "connections".into(), |c| c.display().to_string())
    } else {
        "environment".into()
    };
    escape(&file)
}

/// The field without its document prefix.
pub fn field_of(r: &Rejection) -> String {
    let field = r.path.as_deref().unwrap_or("");
    let bare = ["work_unit.", "preset.", "connections."]
        .iter()
        .find_map(|p| field.strip_prefix(p))
        .unwrap_or(field);
    escape(bare)
}

pub fn run(args: &AdmitArgs) -> u8 {
    let inputs = match load_inputs(&args.work_unit, &args.preset, args.connections.as_ref()) {
        Ok(inputs) => inputs,
        Err(bad) => {
            for BadInput(line) in &bad {
                eprintln!("corral: {line}");
            }
            if args.json {
                let mut out = AdmissionReport::empty();
                out.bad_input = bad.iter().map(|b| b.0.clone()).collect();
                print_json(&out);
            }
            return exit::REJECTED;
        }
    };
    let result = admit(
        &inputs.work_unit,
        &inputs.preset,
        inputs.connections.as_ref(),
        &BTreeMap::new(),
    );
    // Every key is printed whatever the decision (what is not known is null or empty), so
    // a script reads the same keys admitted, rejected or not parsed.
    let mut documents = AdmissionReport::empty();
    documents.work_unit = Some(DocumentRef {
        id: inputs.work_unit.id.clone(),
        digest: digest_of(&inputs.work_unit),
    });
    documents.preset = Some(DocumentRef {
        id: inputs.preset.id.clone(),
        digest: digest_of(&inputs.preset),
    });
    match result {
        Ok(run) => {
            if args.json {
                let mut out = documents;
                out.admissible = true;
                out.policy = Some(run.policy().clone());
                out.policy_digest = Some(run.policy().digest());
                out.exec = Some(run.exec().clone());
                out.limits = Some(*run.limits());
                print_json(&out);
            } else {
                let p = run.policy();
                let list = |v: Vec<String>| {
                    if v.is_empty() {
                        "(none)".to_owned()
                    } else {
                        v.join(", ")
                    }
                };
                out!(
                    "admissible: work unit {} with preset {}",
                    escape(run.work_unit_id()),
                    escape(run.preset_id())
                );
                out!("SandboxPolicy {}", p.digest());
                out!(
                    "  network_mode:      {}",
                    serde_json::to_value(p.network_mode())
                        .unwrap_or_default()
                        .as_str()
                        .unwrap_or("?")
                );
                out!(
                    "  network_allowlist: {}",
                    list(
                        p.network_allowlist()
                            .iter()
                            .map(ToString::to_string)
                            .collect()
                    )
                );
                out!(
                    "  writable_paths:    {}",
                    list(
                        p.writable_paths()
                            .iter()
                            .map(|x| escape(x.as_str()))
                            .collect()
                    )
                );
                out!(
                    "  forbidden_paths:   {}",
                    list(
                        p.forbidden_paths()
                            .iter()
                            .map(|x| escape(x.as_str()))
                            .collect()
                    )
                );
                let e = run.exec();
                out!(
                    "exec: {} {}",
                    escape(&e.executable),
                    e.args
                        .iter()
                        .map(|a| format!("{:?}", escape(a)))
                        .collect::<Vec<_>>()
                        .join(" ")
                );
                out!(
                    "  prompt via:        {}",
                    if e.stdin.is_some() {
                        "stdin"
                    } else {
                        "argument"
                    }
                );
                let l = run.limits();
                out!(
                    "limits: wall {}s, cpu {}s, memory {} B, disk {} B, processes {}, output {} B, patch {} B",
                    l.wall_seconds,
                    l.cpu_seconds,
                    l.memory_bytes,
                    l.disk_bytes,
                    l.max_processes,
                    l.max_output_bytes,
                    l.max_patch_bytes
                );
                out!("authority: candidate only (a run never grants verification or merge)");
            }
            exit::OK
        }
        Err(Rejected(rejections)) => {
            for r in &rejections {
                eprintln!(
                    "corral: rejected: {}: {}: {} [{}]",
                    file_of(r, &args.work_unit, &args.preset, args.connections.as_ref()),
                    field_of(r),
                    escape(&r.detail),
                    r.code
                );
            }
            if args.json {
                let mut out = documents;
                out.rejections.clone_from(&rejections);
                print_json(&out);
            } else {
                out!("rejected: {} reason(s); nothing was run", rejections.len());
            }
            exit::REJECTED
        }
    }
}
