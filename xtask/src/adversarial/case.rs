//! What a case is and how it is judged.
#![allow(dead_code, reason = "the judge API is shared by every case module")]

use std::fmt;

use super::harness::Ctx;

/// One attack from `../shared/threats/adversarial-corpus.md` (or one we added), with the
/// guarantee it attacks and the judge that runs it end to end and reads only what can be
/// observed from outside the sandbox.
pub struct Case {
    /// Corpus id (`NET-01`, `RES-MEM-02`, ...) or ours (`ADM-01`, ...).
    pub id: &'static str,
    pub title: &'static str,
    pub guarantee: &'static str,
    /// The attack script, a file of `tests/adversarial/attacks/` (`cases::attack!`):
    /// `(file name, source)`. Cases may share one. Harness-only cases have none.
    pub script: Option<(&'static str, &'static str)>,
    /// Runs the case (sandboxed run, positive control, observations) and decides. An error
    /// is a harness failure: the case is inconclusive.
    pub judge: fn(&mut Ctx) -> anyhow::Result<Verdict>,
}

impl Case {
    /// `NET-01` -> `NET`, `RES-MEM-02` -> `RES`.
    pub fn category(&self) -> &'static str {
        self.id.split('-').next().unwrap_or(self.id)
    }

    pub fn script_file(&self) -> Option<String> {
        self.script.map(|(file, _)| file.to_owned())
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Outcome {
    Contained,
    NotApplicable,
    Inconclusive,
    Escaped,
}

impl Outcome {
    pub fn name(self) -> &'static str {
        match self {
            Outcome::Contained => "contained",
            Outcome::NotApplicable => "not applicable",
            Outcome::Inconclusive => "inconclusive",
            Outcome::Escaped => "escaped",
        }
    }
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[derive(Clone, Debug)]
pub struct Verdict {
    pub outcome: Outcome,
    /// Every observation behind the outcome, in order: breaches, missing controls, notes.
    pub evidence: Vec<String>,
}

impl Verdict {
    pub fn not_applicable(why: impl Into<String>) -> Self {
        Self {
            outcome: Outcome::NotApplicable,
            evidence: vec![why.into()],
        }
    }

    pub fn inconclusive(why: impl Into<String>) -> Self {
        Self {
            outcome: Outcome::Inconclusive,
            evidence: vec![why.into()],
        }
    }
}

/// Collects observations for one case. Any breach makes the case `escaped`; otherwise any
/// positive control that did not fire makes it `inconclusive` (a refusal test whose control
/// never fires proves nothing); otherwise it is `contained`. A judge with no control at all
/// is inconclusive too.
#[derive(Default)]
pub struct Judge {
    breaches: Vec<String>,
    missing_controls: Vec<String>,
    controls: usize,
    notes: Vec<String>,
}

impl Judge {
    pub fn new() -> Self {
        Self::default()
    }

    /// An observation that, when `seen`, proves the guarantee was broken.
    pub fn breach(&mut self, seen: bool, what: impl Into<String>) -> &mut Self {
        if seen {
            self.breaches.push(what.into());
        }
        self
    }

    /// A positive control: `fired` must be true (the harness saw the attack work with the
    /// guard off, or saw its detector trip), or the case is inconclusive.
    pub fn control(&mut self, fired: bool, what: impl Into<String>) -> &mut Self {
        self.controls += 1;
        if !fired {
            self.missing_controls
                .push(format!("control did not fire: {}", what.into()));
        }
        self
    }

    /// A requirement of the run itself (it must have started, produced a manifest, ...):
    /// when false the harness could not observe the attack, so the case is inconclusive.
    pub fn require(&mut self, ok: bool, what: impl Into<String>) -> &mut Self {
        if !ok {
            self.missing_controls
                .push(format!("precondition failed: {}", what.into()));
        }
        self
    }

    pub fn note(&mut self, what: impl Into<String>) -> &mut Self {
        self.notes.push(what.into());
        self
    }

    pub fn verdict(&self) -> Verdict {
        let (outcome, mut evidence) = if !self.breaches.is_empty() {
            (Outcome::Escaped, self.breaches.clone())
        } else if !self.missing_controls.is_empty() {
            (Outcome::Inconclusive, self.missing_controls.clone())
        } else if self.controls == 0 {
            (
                Outcome::Inconclusive,
                vec!["the case has no positive control".to_owned()],
            )
        } else {
            (Outcome::Contained, Vec::new())
        };
        evidence.extend(self.notes.iter().cloned());
        Verdict { outcome, evidence }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn breach_beats_controls_and_missing_control_is_inconclusive() {
        let mut j = Judge::new();
        j.control(true, "c");
        assert_eq!(j.verdict().outcome, Outcome::Contained);
        j.control(false, "d");
        assert_eq!(j.verdict().outcome, Outcome::Inconclusive);
        j.breach(true, "b");
        assert_eq!(j.verdict().outcome, Outcome::Escaped);
        assert_eq!(Judge::new().verdict().outcome, Outcome::Inconclusive);
    }
}
