//! Hands admitted runs to another engine: a Kubernetes `batch/v1` Job ([`k8s`]) or an OCI
//! runtime bundle `config.json` ([`oci`]), built from typed structs (`k8s-openapi`,
//! `oci-spec`), never from hand-written JSON.
//!
//! Architecture Invariant: export never weakens admission. Everything here takes an
//! [`Admitted`] batch, which only [`Admitted::admit`] builds, by calling
//! `corral_admission::admit` on every WorkUnit with the same rules as `corral run`; a single
//! rejection rejects the whole export. The crate is pure: it builds values, the caller writes
//! them (ADR-0050).
#![warn(missing_docs)]
#![forbid(unsafe_code)]

pub mod k8s;
pub mod oci;

use std::collections::BTreeMap;

use corral_admission::{AdmittedRun, Rejected, admit};
use corral_contract::{AgentPreset, Digest, TrustedConnections, WorkUnit, digest_of};
use serde::Serialize;

/// An export problem that is not an admission rejection: bad options (exit 2 at the CLI).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ExportError {
    /// An option's value is unusable; `option` names it (`--image`).
    #[error("{option}: {message}")]
    BadOption {
        /// The option, as the command line spells it.
        option: &'static str,
        /// What is wrong with its value.
        message: String,
    },
    /// Serialization of a typed struct failed (a bug, not bad input).
    #[error("serializing {what}: {message}")]
    Serialize {
        /// What was being serialized.
        what: &'static str,
        /// The serializer's error.
        message: String,
    },
}

fn bad(option: &'static str, message: impl Into<String>) -> ExportError {
    ExportError::BadOption {
        option,
        message: message.into(),
    }
}

/// One WorkUnit of a batch: the document as parsed and the run admission made of it.
#[derive(Debug, Clone)]
pub struct AdmittedUnit {
    work_unit: WorkUnit,
    run: AdmittedRun,
}

impl AdmittedUnit {
    /// The WorkUnit as parsed.
    #[must_use]
    pub fn work_unit(&self) -> &WorkUnit {
        &self.work_unit
    }
    /// The run admission made of it (its SandboxPolicy, exec spec and limits).
    #[must_use]
    pub fn run(&self) -> &AdmittedRun {
        &self.run
    }
}

/// A batch of WorkUnits sharing one preset (and connections), every one admitted.
#[derive(Debug, Clone)]
pub struct Admitted {
    preset: AgentPreset,
    connections: Option<TrustedConnections>,
    units: Vec<AdmittedUnit>,
}

impl Admitted {
    /// Admits every WorkUnit with `corral run`'s rules and an empty caller environment (an
    /// export carries no `--env` values: they would end up in a ConfigMap or a config file).
    ///
    /// An empty `work_units` is admitted as an empty batch; the exporters refuse it.
    ///
    /// # Errors
    /// Every rejected WorkUnit with its batch index and all its rejections.
    pub fn admit(
        work_units: Vec<WorkUnit>,
        preset: AgentPreset,
        connections: Option<TrustedConnections>,
    ) -> Result<Self, Vec<(usize, Rejected)>> {
        let env = BTreeMap::new();
        let mut units = Vec::with_capacity(work_units.len());
        let mut rejected = Vec::new();
        for (i, wu) in work_units.into_iter().enumerate() {
            match admit(&wu, &preset, connections.as_ref(), &env) {
                Ok(run) => units.push(AdmittedUnit { work_unit: wu, run }),
                Err(r) => rejected.push((i, r)),
            }
        }
        if rejected.is_empty() {
            Ok(Self {
                preset,
                connections,
                units,
            })
        } else {
            Err(rejected)
        }
    }

    /// The admitted WorkUnits, in batch order.
    #[must_use]
    pub fn units(&self) -> &[AdmittedUnit] {
        &self.units
    }
    /// The AgentPreset every unit was admitted with.
    #[must_use]
    pub fn preset(&self) -> &AgentPreset {
        &self.preset
    }
    /// The trusted connections document the batch was admitted with, if any.
    #[must_use]
    pub fn connections(&self) -> Option<&TrustedConnections> {
        self.connections.as_ref()
    }

    /// Digest over the documents' digests, in batch order: names the ConfigMap.
    #[must_use]
    pub fn documents_digest(&self) -> Digest {
        #[derive(Serialize)]
        struct Docs<'a> {
            preset: Digest,
            connections: Option<Digest>,
            work_units: Vec<&'a Digest>,
        }
        digest_of(&Docs {
            preset: digest_of(&self.preset),
            connections: self.connections.as_ref().map(digest_of),
            work_units: self
                .units
                .iter()
                .map(|u| u.run.work_unit_digest())
                .collect(),
        })
    }
}

/// Pretty JSON with sorted object keys and a final newline: the same value always gives the
/// same bytes (golden files), whatever map type a struct uses inside.
///
/// # Errors
/// [`ExportError::Serialize`] when the value cannot be represented as JSON.
pub fn to_json_pretty<T: Serialize>(value: &T, what: &'static str) -> Result<String, ExportError> {
    let err = |e: serde_json::Error| ExportError::Serialize {
        what,
        message: e.to_string(),
    };
    // serde_json's Map is a BTreeMap (no preserve_order), so this sorts every object.
    let v = serde_json::to_value(value).map_err(err)?;
    // Bidi, C1 and invisible code points as \uXXXX, as every JSON corral prints (ADR-0004).
    let mut s = corral_contract::canonical::pretty_json(&v).map_err(err)?;
    s.push('\n');
    Ok(s)
}

/// A document as it goes into a ConfigMap key or an annotation: pretty JSON, sorted keys.
fn document_text<T: Serialize>(doc: &T, what: &'static str) -> Result<String, ExportError> {
    to_json_pretty(doc, what)
}
