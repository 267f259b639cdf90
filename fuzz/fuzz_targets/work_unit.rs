//! WorkUnit parsing and admission: whatever the bytes, nothing panics, and an admitted run's
//! policy only holds safe scope entries and canonical destinations.
#![no_main]

use std::collections::BTreeMap;

use corral_admission::{admit, parse_document};
use corral_contract::{AgentPreset, Destination, WorkUnit};
use libfuzzer_sys::fuzz_target;

const PRESET: &str = r#"{"schema_version":"corral.agent-preset/v1","id":"p","executable":"/bin/agent",
"argv":[],"prompt_transport":{"kind":"stdin"},"env_allowlist":["LANG"],"network_policy":"allowlisted",
"authority":"candidate_only"}"#;

fn safe(s: &str) -> bool {
    let body = s.strip_suffix('/').unwrap_or(s);
    !s.starts_with('/')
        && !s.contains('\\')
        && !s.chars().any(char::is_control)
        && body.split('/').all(|c| !c.is_empty() && c != "." && c != "..")
}

fuzz_target!(|data: &[u8]| {
    let Ok(wu) = parse_document::<WorkUnit>(data) else { return };
    let Ok(preset) = parse_document::<AgentPreset>(PRESET.as_bytes()) else { return };
    for network in [corral_contract::documents::PresetNetworkPolicy::Allowlisted, corral_contract::documents::PresetNetworkPolicy::Disabled] {
        let mut preset = preset.clone();
        preset.network_policy = network;
        if let Ok(run) = admit(&wu, &preset, None, &BTreeMap::new()) {
            let p = run.policy();
            for entry in p.writable_paths().iter().chain(p.forbidden_paths()) {
                assert!(safe(entry.as_str()), "unsafe scope entry admitted: {:?}", entry.as_str());
            }
            for d in p.network_allowlist() {
                let text = d.to_string();
                assert_eq!(Destination::parse(&text).as_ref(), Ok(d), "destination not canonical");
                assert_eq!(text, text.to_ascii_lowercase());
            }
            assert!(wu.security.sandbox_required == Some(true));
            assert!(wu.permissions.secrets.as_ref().is_some_and(Vec::is_empty));
        }
    }
});
