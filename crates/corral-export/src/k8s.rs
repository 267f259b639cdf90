//! `corral export k8s-job`: an Indexed `batch/v1` Job whose pods run `corral run` on one
//! admitted WorkUnit each, plus the immutable ConfigMap holding the admitted documents
//! (ADR-0050).

use std::collections::BTreeMap;

use k8s_openapi::api::batch::v1::{
    Job, JobSpec, PodFailurePolicy, PodFailurePolicyOnExitCodesRequirement,
    PodFailurePolicyOnPodConditionsPattern, PodFailurePolicyRule,
};
use k8s_openapi::api::core::v1::{
    Capabilities, ConfigMap, ConfigMapVolumeSource, Container, EmptyDirVolumeSource, EnvVar,
    EnvVarSource, ObjectFieldSelector, PodSecurityContext, PodSpec, PodTemplateSpec,
    ResourceRequirements, SeccompProfile, SecurityContext, Volume, VolumeMount,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::Serialize;

use crate::{Admitted, ExportError, bad, document_text};

/// `corral run` exit code for an admission rejection or bad input (CONTRACT.md).
pub const EXIT_REJECTED: i32 = 2;
/// `corral run` exit code for a missing sandbox capability (CONTRACT.md).
pub const EXIT_CAPABILITY_MISSING: i32 = 3;
/// `corral run` exit code for a recorded outcome that is not a captured candidate.
pub const EXIT_FAILED: i32 = 1;

/// Linux capabilities the container keeps (everything else is dropped), each with the part of
/// corral's Linux backend (ADR-0010) that needs it. `corral-cli`'s tests run `corral probe`
/// with exactly this bounding set (all nine capabilities must hold) and with each one removed.
pub const CAPABILITIES_KEPT: &[(&str, &str)] = &[
    (
        "SYS_ADMIN",
        "new pid/mount/ipc/uts/net/cgroup namespaces, fsopen/fsmount of the attempt tmpfs, open_tree/move_mount/mount_setattr (idmapped, read-only binds), overlay, pivot_root, setns into the sandbox netns for the egress listener",
    ),
    (
        "NET_ADMIN",
        "bringing up loopback (SIOCSIFFLAGS) inside the sandbox's own network namespace",
    ),
    (
        "SETUID",
        "dropping the worker to uid 65534; writing the uid_map of the idmapping user namespace",
    ),
    (
        "SETGID",
        "dropping the worker to gid 65534 with no supplementary groups; the idmapping gid_map",
    ),
    (
        "SETPCAP",
        "clearing the worker's bounding set and locking its securebits",
    ),
    (
        "CHOWN",
        "handing HOME and new writable directories on the attempt tmpfs to the worker's uid",
    ),
    (
        "DAC_OVERRIDE",
        "writing cgroup files and creating directories owned by the worker's uid",
    ),
    (
        "KILL",
        "killing the worker's processes (uid 65534) in its cgroup at every ending (cgroup v1)",
    ),
];

/// Memory for corral itself on top of the worker's `memory_bytes` (the supervisor, git
/// reading the base checkout, capture): the worker's cgroup, tmpfs included, is a child of
/// the pod's and already capped at `memory_bytes`.
pub const MEMORY_HEADROOM_BYTES: u64 = 256 << 20;
/// Seconds on top of `wall_seconds` for the probe, filling the base cache and capture.
pub const DEADLINE_GRACE_SECONDS: u64 = 120;
/// Disk for the base checkout cache and the artifact store, on top of the patch and log
/// ceilings (the worker's own writes are on a tmpfs charged to memory, not to this disk).
pub const STATE_HEADROOM_BYTES: u64 = 1 << 30;
/// Retries of one index for failures that are neither corral's 1, 2 nor 3 (eviction aside).
pub const BACKOFF_LIMIT_PER_INDEX: i32 = 1;

/// Where the container finds the documents, keeps its state, and which env var picks the
/// WorkUnit.
pub const DOCUMENTS_DIR: &str = "/etc/corral/run";
/// corral's own state in the container (`HOME`, caches, the artifact store).
pub const STATE_DIR: &str = "/var/lib/corral";
/// Set from the pod's completion index; picks `work-unit-<index>.json`.
pub const INDEX_ENV: &str = "CORRAL_WORK_UNIT_INDEX";
const TMP_SIZE: &str = "64Mi";

const NAME_LABEL: &str = "app.kubernetes.io/name";
const MANAGED_BY_LABEL: &str = "app.kubernetes.io/managed-by";

/// Options of `corral export k8s-job`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobOptions {
    /// `REF@sha256:<64 hex>`: the image holding `corral` on `PATH` and the repository.
    pub image: String,
    /// `runtimeClassName` (e.g. `gvisor`, `kata`), or none for the cluster default.
    pub runtime_class: Option<String>,
    /// Pods running at once.
    pub parallelism: u32,
    /// The Job's name; default `corral-<12 hex of the export's digest>`.
    pub name: Option<String>,
    /// The canonical repository inside the image (`corral run --repo`).
    pub repo: String,
}

/// The two objects of an export: the ConfigMap must exist before the Job's pods start.
#[derive(Debug, Clone, PartialEq)]
pub struct JobExport {
    /// The immutable ConfigMap holding the admitted documents: the preset, the connections
    /// (when given) and every WorkUnit.
    pub config_map: ConfigMap,
    /// The Indexed Job: one completion per WorkUnit, each running `corral run`.
    pub job: Job,
}

/// Key of the i-th WorkUnit in the ConfigMap.
#[must_use]
pub fn work_unit_key(index: usize) -> String {
    format!("work-unit-{index}.json")
}

fn is_dns_label(s: &str, max: usize) -> bool {
    !s.is_empty()
        && s.len() <= max
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}

fn is_dns_subdomain(s: &str) -> bool {
    s.len() <= 253 && s.split('.').all(|label| is_dns_label(label, 63))
}

/// Checks `REF@sha256:<64 lowercase hex>`: a Job must run exactly the image that was meant.
fn check_image(image: &str) -> Result<(), ExportError> {
    let Some((name, digest)) = image.rsplit_once('@') else {
        return Err(bad(
            "--image",
            "must be pinned by digest: REF@sha256:<64 hex>",
        ));
    };
    let hex = digest.strip_prefix("sha256:").unwrap_or("");
    let hex_ok = hex.len() == 64
        && hex
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
    if !hex_ok {
        return Err(bad(
            "--image",
            "digest must be sha256: followed by 64 lowercase hex digits",
        ));
    }
    let name_ok = !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_graphic() && b != b'@' && b != b'"' && b != b'\\');
    if !name_ok {
        return Err(bad(
            "--image",
            "the reference before @ is empty or malformed",
        ));
    }
    Ok(())
}

fn check_options(opts: &JobOptions) -> Result<(), ExportError> {
    check_image(&opts.image)?;
    if let Some(rc) = &opts.runtime_class
        && !is_dns_subdomain(rc)
    {
        return Err(bad(
            "--runtime-class",
            "must be a RuntimeClass name (lowercase DNS subdomain), e.g. gvisor or kata",
        ));
    }
    if opts.parallelism == 0 || i32::try_from(opts.parallelism).is_err() {
        return Err(bad("--parallel", "must be between 1 and 2147483647"));
    }
    if let Some(name) = &opts.name
        && !is_dns_label(name, 52)
    {
        return Err(bad(
            "--name",
            "must be a lowercase DNS label of at most 52 characters (pod names add a suffix)",
        ));
    }
    if !opts.repo.starts_with('/')
        || opts.repo.chars().any(char::is_control)
        || opts.repo.split('/').any(|c| c == "..")
    {
        return Err(bad(
            "--repo",
            "must be an absolute path inside the image without `..`",
        ));
    }
    Ok(())
}

fn labels() -> BTreeMap<String, String> {
    BTreeMap::from([
        (NAME_LABEL.to_owned(), "corral".to_owned()),
        (MANAGED_BY_LABEL.to_owned(), "corral-export".to_owned()),
    ])
}

fn quantity(n: u64) -> Quantity {
    Quantity(n.to_string())
}

fn short(d: &corral_contract::Digest) -> String {
    d.hex().chars().take(12).collect()
}

/// The ConfigMap with the admitted documents: `preset.json`, `connections.json` (when given)
/// and `work-unit-<i>.json`. Its name carries the documents' digest and it is immutable, so
/// a Job always reads exactly what was admitted here.
///
/// # Errors
/// [`ExportError::Serialize`] only.
pub fn config_map(batch: &Admitted) -> Result<ConfigMap, ExportError> {
    let mut data = BTreeMap::new();
    data.insert(
        "preset.json".to_owned(),
        document_text(batch.preset(), "preset")?,
    );
    if let Some(c) = batch.connections() {
        data.insert(
            "connections.json".to_owned(),
            document_text(c, "connections")?,
        );
    }
    for (i, unit) in batch.units().iter().enumerate() {
        data.insert(
            work_unit_key(i),
            document_text(unit.work_unit(), "work unit")?,
        );
    }
    Ok(ConfigMap {
        metadata: ObjectMeta {
            name: Some(config_map_name(batch)),
            labels: Some(labels()),
            ..ObjectMeta::default()
        },
        data: Some(data),
        immutable: Some(true),
        ..ConfigMap::default()
    })
}

/// `corral-docs-<12 hex of the documents' digest>`.
#[must_use]
pub fn config_map_name(batch: &Admitted) -> String {
    format!("corral-docs-{}", short(&batch.documents_digest()))
}

/// What a Job annotation records of each WorkUnit.
#[derive(Serialize)]
struct UnitNote<'a> {
    index: usize,
    id: &'a str,
    digest: String,
    policy_digest: String,
}

/// The Job and its ConfigMap.
///
/// # Errors
/// [`ExportError::BadOption`] for unusable options, [`ExportError::Serialize`] otherwise.
pub fn job(batch: &Admitted, opts: &JobOptions) -> Result<JobExport, ExportError> {
    check_options(opts)?;
    let units = batch.units();
    let count = i32::try_from(units.len())
        .ok()
        .filter(|n| *n > 0)
        .ok_or_else(|| bad("--work-unit", "between 1 and 2147483647 WorkUnits"))?;
    let config_map = config_map(batch)?;
    let cm_name = config_map_name(batch);

    // One pod template for every index: take the largest ceiling of each kind.
    let max = |f: fn(&corral_contract::Limits) -> u64| {
        units.iter().map(|u| f(u.run().limits())).max().unwrap_or(1)
    };
    let wall = max(|l| l.wall_seconds.get());
    let cpu = max(|l| l.cpu_seconds.get());
    let memory = max(|l| l.memory_bytes.get());
    // disk_bytes needs no pod resource of its own: the worker's writable places are one
    // tmpfs charged to its memory cgroup, a child of the pod's (ADR-0050).
    let outputs = max(|l| {
        l.max_patch_bytes
            .get()
            .saturating_add(l.max_output_bytes.get().saturating_mul(2))
    });
    // Whole cores a worker can use on average over its wall time, at least one.
    let cores = cpu.div_ceil(wall).max(1);
    let memory_limit = memory.saturating_add(MEMORY_HEADROOM_BYTES);
    let state_size = outputs.saturating_add(STATE_HEADROOM_BYTES);
    let ephemeral = state_size.saturating_add(64 << 20);
    let pod_deadline = wall.saturating_add(DEADLINE_GRACE_SECONDS);
    let n = units.len() as u64;
    let waves = n.div_ceil(u64::from(opts.parallelism).clamp(1, n));
    let job_deadline = pod_deadline
        .saturating_mul(waves)
        .saturating_mul(1 + BACKOFF_LIMIT_PER_INDEX.unsigned_abs() as u64);

    let resources: BTreeMap<String, Quantity> = BTreeMap::from([
        ("cpu".to_owned(), quantity(cores)),
        ("memory".to_owned(), quantity(memory_limit)),
        ("ephemeral-storage".to_owned(), quantity(ephemeral)),
    ]);

    let docs = |name: &str| format!("{DOCUMENTS_DIR}/{name}");
    let mut args = vec![
        "run".to_owned(),
        "--work-unit".to_owned(),
        docs(&format!("work-unit-$({INDEX_ENV}).json")),
        "--preset".to_owned(),
        docs("preset.json"),
    ];
    if batch.connections().is_some() {
        args.push("--connections".to_owned());
        args.push(docs("connections.json"));
    }
    args.extend([
        "--repo".to_owned(),
        opts.repo.clone(),
        "--artifacts".to_owned(),
        format!("{STATE_DIR}/artifacts"),
        "--json".to_owned(),
    ]);

    let env = |name: &str, value: String| EnvVar {
        name: name.to_owned(),
        value: Some(value),
        ..EnvVar::default()
    };
    let container = Container {
        name: "corral".to_owned(),
        image: Some(opts.image.clone()),
        image_pull_policy: Some("IfNotPresent".to_owned()),
        command: Some(vec!["corral".to_owned()]),
        args: Some(args),
        env: Some(vec![
            EnvVar {
                name: INDEX_ENV.to_owned(),
                value_from: Some(EnvVarSource {
                    field_ref: Some(ObjectFieldSelector {
                        field_path:
                            "metadata.annotations['batch.kubernetes.io/job-completion-index']"
                                .to_owned(),
                        ..ObjectFieldSelector::default()
                    }),
                    ..EnvVarSource::default()
                }),
                ..EnvVar::default()
            },
            // corral's own cache and data; the worker never sees corral's environment.
            env("HOME", STATE_DIR.to_owned()),
            env("TMPDIR", "/tmp".to_owned()),
            env("XDG_CACHE_HOME", format!("{STATE_DIR}/cache")),
            env("XDG_DATA_HOME", format!("{STATE_DIR}/data")),
        ]),
        resources: Some(ResourceRequirements {
            limits: Some(resources.clone()),
            requests: Some(resources),
            ..ResourceRequirements::default()
        }),
        security_context: Some(SecurityContext {
            // corral's sandbox is rootful (ADR-0010): the supervisor is uid 0 with the
            // capabilities below; the worker it starts is uid 65534 with none.
            run_as_user: Some(0),
            run_as_group: Some(0),
            run_as_non_root: Some(false),
            privileged: Some(false),
            // The API refuses allowPrivilegeEscalation=false together with SYS_ADMIN; the
            // worker gets no_new_privs from corral itself.
            allow_privilege_escalation: Some(true),
            capabilities: Some(Capabilities {
                drop: Some(vec!["ALL".to_owned()]),
                add: Some(
                    CAPABILITIES_KEPT
                        .iter()
                        .map(|(c, _)| (*c).to_owned())
                        .collect(),
                ),
            }),
            read_only_root_filesystem: Some(true),
            proc_mount: Some("Default".to_owned()),
            seccomp_profile: Some(SeccompProfile {
                type_: "RuntimeDefault".to_owned(),
                ..SeccompProfile::default()
            }),
            ..SecurityContext::default()
        }),
        volume_mounts: Some(vec![
            VolumeMount {
                name: "documents".to_owned(),
                mount_path: DOCUMENTS_DIR.to_owned(),
                read_only: Some(true),
                ..VolumeMount::default()
            },
            VolumeMount {
                name: "state".to_owned(),
                mount_path: STATE_DIR.to_owned(),
                ..VolumeMount::default()
            },
            VolumeMount {
                name: "tmp".to_owned(),
                mount_path: "/tmp".to_owned(),
                ..VolumeMount::default()
            },
        ]),
        ..Container::default()
    };

    let pod = PodSpec {
        containers: vec![container],
        restart_policy: Some("Never".to_owned()),
        runtime_class_name: opts.runtime_class.clone(),
        active_deadline_seconds: Some(i64::try_from(pod_deadline).unwrap_or(i64::MAX)),
        automount_service_account_token: Some(false),
        enable_service_links: Some(false),
        termination_grace_period_seconds: Some(30),
        security_context: Some(PodSecurityContext {
            seccomp_profile: Some(SeccompProfile {
                type_: "RuntimeDefault".to_owned(),
                ..SeccompProfile::default()
            }),
            ..PodSecurityContext::default()
        }),
        volumes: Some(vec![
            Volume {
                name: "documents".to_owned(),
                config_map: Some(ConfigMapVolumeSource {
                    name: cm_name.clone(),
                    default_mode: Some(0o444),
                    optional: Some(false),
                    ..ConfigMapVolumeSource::default()
                }),
                ..Volume::default()
            },
            Volume {
                name: "state".to_owned(),
                empty_dir: Some(EmptyDirVolumeSource {
                    size_limit: Some(quantity(state_size)),
                    ..EmptyDirVolumeSource::default()
                }),
                ..Volume::default()
            },
            Volume {
                name: "tmp".to_owned(),
                empty_dir: Some(EmptyDirVolumeSource {
                    size_limit: Some(Quantity(TMP_SIZE.to_owned())),
                    ..EmptyDirVolumeSource::default()
                }),
                ..Volume::default()
            },
        ]),
        ..PodSpec::default()
    };

    let exit_rule = |action: &str, codes: Vec<i32>| PodFailurePolicyRule {
        action: action.to_owned(),
        on_exit_codes: Some(PodFailurePolicyOnExitCodesRequirement {
            container_name: Some("corral".to_owned()),
            operator: "In".to_owned(),
            values: codes,
        }),
        ..PodFailurePolicyRule::default()
    };
    let failure_policy = PodFailurePolicy {
        rules: vec![
            // Admission rejected / bad input and capability missing: the same on every retry.
            exit_rule("FailJob", vec![EXIT_REJECTED, EXIT_CAPABILITY_MISSING]),
            // A recorded outcome (candidate rejected, attempt failed): a result, not a fault.
            exit_rule("FailIndex", vec![EXIT_FAILED]),
            // Node drain, preemption: not the attempt's fault, not counted.
            PodFailurePolicyRule {
                action: "Ignore".to_owned(),
                on_pod_conditions: Some(vec![PodFailurePolicyOnPodConditionsPattern {
                    type_: "DisruptionTarget".to_owned(),
                    status: Some("True".to_owned()),
                }]),
                ..PodFailurePolicyRule::default()
            },
        ],
    };

    let notes: Vec<UnitNote<'_>> = units
        .iter()
        .enumerate()
        .map(|(index, u)| UnitNote {
            index,
            id: u.run().work_unit_id(),
            digest: u.run().work_unit_digest().to_string(),
            policy_digest: u.run().policy().digest().to_string(),
        })
        .collect();
    let notes = serde_json::to_string(&notes).map_err(|e| ExportError::Serialize {
        what: "work unit notes",
        message: e.to_string(),
    })?;
    let mut annotations = BTreeMap::from([
        ("corral.dev/work-units".to_owned(), notes),
        (
            "corral.dev/preset".to_owned(),
            format!(
                "{} {}",
                batch.preset().id,
                corral_contract::digest_of(batch.preset())
            ),
        ),
        ("corral.dev/documents".to_owned(), cm_name.clone()),
    ]);
    if let Some(c) = batch.connections() {
        annotations.insert(
            "corral.dev/connections".to_owned(),
            corral_contract::digest_of(c).to_string(),
        );
    }

    let name = match &opts.name {
        Some(n) => n.clone(),
        None => {
            #[derive(Serialize)]
            struct Key<'a> {
                documents: String,
                image: &'a str,
                runtime_class: Option<&'a str>,
                parallelism: u32,
                repo: &'a str,
            }
            let d = corral_contract::digest_of(&Key {
                documents: batch.documents_digest().to_string(),
                image: &opts.image,
                runtime_class: opts.runtime_class.as_deref(),
                parallelism: opts.parallelism,
                repo: &opts.repo,
            });
            format!("corral-{}", short(&d))
        }
    };

    let job = Job {
        metadata: ObjectMeta {
            name: Some(name),
            labels: Some(labels()),
            annotations: Some(annotations),
            ..ObjectMeta::default()
        },
        spec: Some(JobSpec {
            completion_mode: Some("Indexed".to_owned()),
            completions: Some(count),
            parallelism: Some(i32::try_from(opts.parallelism).unwrap_or(i32::MAX)),
            backoff_limit_per_index: Some(BACKOFF_LIMIT_PER_INDEX),
            active_deadline_seconds: Some(i64::try_from(job_deadline).unwrap_or(i64::MAX)),
            pod_failure_policy: Some(failure_policy),
            // Required with a podFailurePolicy: a replacement starts only once the old pod
            // has fully terminated.
            pod_replacement_policy: Some("Failed".to_owned()),
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(labels()),
                    ..ObjectMeta::default()
                }),
                spec: Some(pod),
            },
            ..JobSpec::default()
        }),
        ..Job::default()
    };
    Ok(JobExport { config_map, job })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn image_must_be_pinned() {
        let hex = "a".repeat(64);
        assert!(check_image(&format!("registry.example/corral@sha256:{hex}")).is_ok());
        assert!(check_image("registry.example/corral:latest").is_err());
        assert!(check_image(&format!("r/c@sha256:{}", "A".repeat(64))).is_err());
        assert!(check_image(&format!("r/c@sha512:{hex}")).is_err());
        assert!(check_image(&format!("@sha256:{hex}")).is_err());
        assert!(check_image(&format!("r c@sha256:{hex}")).is_err());
    }

    #[test]
    fn names() {
        assert!(is_dns_label("corral-1", 52));
        assert!(!is_dns_label("Corral", 52));
        assert!(!is_dns_label("-a", 52));
        assert!(!is_dns_label(&"a".repeat(53), 52));
        assert!(is_dns_subdomain("kata-qemu.example"));
        assert!(!is_dns_subdomain("gvisor_1"));
    }
}
