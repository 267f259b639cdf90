//! The suite's outputs: a terminal table, a JSON report and a SARIF 2.1.0 log.

use std::path::Path;
use std::time::Duration;

use anyhow::Result;
use serde_json::{Value, json};

use super::case::Outcome;

#[derive(Clone, Debug)]
pub struct CaseResult {
    pub id: String,
    pub category: String,
    pub title: String,
    pub guarantee: String,
    pub script: Option<String>,
    pub outcome: Outcome,
    pub evidence: Vec<String>,
    pub seconds: f64,
}

pub fn print_table(results: &[CaseResult]) {
    println!(
        "{:<12} {:<5} {:<44} {:<15} {:>6}",
        "case", "cat", "guarantee", "result", "time"
    );
    for r in results {
        println!(
            "{:<12} {:<5} {:<44} {:<15} {:>5.1}s",
            r.id,
            r.category,
            super::harness::truncate(&r.guarantee, 41),
            r.outcome.name(),
            r.seconds
        );
        if matches!(r.outcome, Outcome::NotApplicable) {
            println!("{:<12} {}", "", r.evidence.join(" | "));
        }
    }
    let count = |o: Outcome| results.iter().filter(|r| r.outcome == o).count();
    println!(
        "{} contained, {} escaped, {} inconclusive, {} not applicable",
        count(Outcome::Contained),
        count(Outcome::Escaped),
        count(Outcome::Inconclusive),
        count(Outcome::NotApplicable)
    );
}

fn host_facts() -> Value {
    let read = |p: &str| {
        std::fs::read_to_string(p)
            .map(|s| s.trim().to_owned())
            .unwrap_or_default()
    };
    json!({
        "kernel": read("/proc/sys/kernel/osrelease"),
        "hostname": read("/proc/sys/kernel/hostname"),
        "cgroup_v2_only": std::path::Path::new("/sys/fs/cgroup/cgroup.controllers").exists(),
    })
}

pub fn write_json(
    path: &Path,
    results: &[CaseResult],
    leftovers: &[String],
    elapsed: Duration,
    filter: &[String],
) -> Result<()> {
    let count = |o: Outcome| results.iter().filter(|r| r.outcome == o).count();
    // Only the whole suite can qualify a host: a filtered run says what it selected.
    let qualified = filter.is_empty()
        && count(Outcome::Escaped) == 0
        && count(Outcome::Inconclusive) == 0
        && leftovers.is_empty();
    let doc = json!({
        "schema_version": "corral.adversarial-report/v1",
        "host": host_facts(),
        "qualified": qualified,
        "filter": if filter.is_empty() { Value::Null } else { json!(filter) },
        "seconds": elapsed.as_secs_f64(),
        "summary": {
            "contained": count(Outcome::Contained),
            "escaped": count(Outcome::Escaped),
            "inconclusive": count(Outcome::Inconclusive),
            "not_applicable": count(Outcome::NotApplicable),
        },
        "host_left_changed": leftovers,
        "cases": results.iter().map(|r| json!({
            "id": r.id, "category": r.category, "title": r.title, "guarantee": r.guarantee,
            "attack": r.script.as_ref().map(|s| format!("tests/adversarial/attacks/{s}")),
            "result": r.outcome.name(), "evidence": r.evidence, "seconds": r.seconds,
        })).collect::<Vec<_>>(),
    });
    write(path, &doc)
}

pub fn write_sarif(path: &Path, results: &[CaseResult]) -> Result<()> {
    let rules: Vec<Value> = results
        .iter()
        .map(|r| {
            json!({
                "id": r.id,
                "name": r.title,
                "shortDescription": { "text": r.title },
                "fullDescription": { "text": r.guarantee },
                "properties": { "category": r.category },
            })
        })
        .collect();
    let res: Vec<Value> = results
        .iter()
        .map(|r| {
            // SARIF: a level other than "none" only for kind "fail".
            let (kind, level) = match r.outcome {
                Outcome::Contained => ("pass", "none"),
                Outcome::NotApplicable => ("notApplicable", "none"),
                Outcome::Inconclusive => ("review", "none"),
                Outcome::Escaped => ("fail", "error"),
            };
            let text = if r.evidence.is_empty() {
                format!("{}: {}", r.outcome.name(), r.guarantee)
            } else {
                format!("{}: {}", r.outcome.name(), r.evidence.join(" | "))
            };
            let uri = r
                .script
                .as_ref()
                .map(|s| format!("tests/adversarial/attacks/{s}"))
                .unwrap_or_else(|| "xtask/src/adversarial/cases/mod.rs".into());
            json!({
                "ruleId": r.id,
                "kind": kind,
                "level": level,
                "message": { "text": text },
                "locations": [{ "physicalLocation": { "artifactLocation": { "uri": uri } } }],
            })
        })
        .collect();
    let doc = json!({
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [{
            "tool": { "driver": {
                "name": "corral-adversarial",
                "informationUri": "https://example.invalid/corral",
                "rules": rules,
            }},
            "results": res,
        }],
    });
    write(path, &doc)
}

fn write(path: &Path, doc: &Value) -> Result<()> {
    if let Some(d) = path.parent() {
        std::fs::create_dir_all(d)?;
    }
    std::fs::write(path, serde_json::to_vec_pretty(doc)?)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sarif_marks_only_escapes_as_failures() {
        let r = |id: &str, outcome| CaseResult {
            id: id.into(),
            category: "NET".into(),
            title: "t".into(),
            guarantee: "g".into(),
            script: Some(format!("{id}.py")),
            outcome,
            evidence: vec!["e".into()],
            seconds: 0.1,
        };
        let dir = std::env::temp_dir().join(format!("corral-adv-sarif-{}", std::process::id()));
        let path = dir.join("r.sarif");
        write_sarif(
            &path,
            &[
                r("NET-01", Outcome::Contained),
                r("NET-02", Outcome::Escaped),
                r("NET-03", Outcome::Inconclusive),
                r("NET-04", Outcome::NotApplicable),
            ],
        )
        .unwrap();
        let doc: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(doc["version"], "2.1.0");
        let results = doc["runs"][0]["results"].as_array().unwrap();
        let kinds: Vec<(&str, &str)> = results
            .iter()
            .map(|r| (r["kind"].as_str().unwrap(), r["level"].as_str().unwrap()))
            .collect();
        assert_eq!(
            kinds,
            [
                ("pass", "none"),
                ("fail", "error"),
                ("review", "none"),
                ("notApplicable", "none")
            ]
        );
        assert_eq!(doc["runs"][0]["tool"]["driver"]["rules"][1]["id"], "NET-02");
    }
}
