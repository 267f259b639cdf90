//! The worker environment: built only from an explicit caller mapping, never from the
//! process environment, and never carrying credentials or container-engine authority.

use std::collections::BTreeMap;

use corral_contract::{ReasonCode, Rejection};

// The lists are `corral_contract::rules`: the generated JSON Schemas state the same rules
// from the same lists, so the two can never disagree.
use corral_contract::rules::{
    CODE_INJECTION_ENV_NAMES, CODE_INJECTION_ENV_PREFIX, CREDENTIAL_ENV_NAMES,
    CREDENTIAL_ENV_PREFIXES, CREDENTIAL_ENV_SUFFIXES, RESERVED_ENV_NAMES,
};

/// Why an environment name may not be allowlisted, if it may not.
#[must_use]
pub fn forbidden_env_name(name: &str) -> Option<(ReasonCode, &'static str)> {
    let upper = name.to_ascii_uppercase();
    if !is_valid_env_name(name) {
        return Some((
            ReasonCode::EnvNameInvalid,
            "not a valid variable name ([A-Za-z_][A-Za-z0-9_]*)",
        ));
    }
    if RESERVED_ENV_NAMES
        .iter()
        .any(|r| r.eq_ignore_ascii_case(name))
    {
        return Some((
            ReasonCode::EnvNameInvalid,
            "reserved: corral sets it inside the sandbox",
        ));
    }
    if CODE_INJECTION_ENV_NAMES
        .iter()
        .any(|n| n.eq_ignore_ascii_case(name))
        || upper.starts_with(CODE_INJECTION_ENV_PREFIX)
    {
        return Some((
            ReasonCode::EnvNameInvalid,
            "changes how code is loaded before the worker runs",
        ));
    }
    if CREDENTIAL_ENV_NAMES
        .iter()
        .any(|n| n.eq_ignore_ascii_case(name))
        || CREDENTIAL_ENV_PREFIXES.iter().any(|p| upper.starts_with(p))
        || CREDENTIAL_ENV_SUFFIXES.iter().any(|s| upper.ends_with(s))
    {
        return Some((ReasonCode::EnvCredentialName, "names a credential"));
    }
    None
}

fn is_valid_env_name(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
        && name.len() <= 256
}

/// Does this value point at a container engine (docker, containerd, podman, CRI), however it
/// is spelled? Checked on a folded copy: lower case, percent-decoding repeated, backslashes
/// as slashes, repeated slashes collapsed. The value itself is never changed.
#[must_use]
pub fn container_engine_reference(value: &str) -> Option<&'static str> {
    let folded = fold(value);
    const SOCKETS: &[(&str, &str)] = &[
        ("docker.sock", "docker socket"),
        ("dockershim.sock", "dockershim socket"),
        ("cri-dockerd.sock", "cri-dockerd socket"),
        ("containerd.sock", "containerd socket"),
        ("containerd-shim", "containerd shim"),
        ("podman.sock", "podman socket"),
        ("crio.sock", "CRI-O socket"),
        ("buildkitd.sock", "buildkit socket"),
        ("docker_engine", "docker named pipe"),
        ("/run/docker", "docker runtime directory"),
        ("/run/containerd", "containerd runtime directory"),
        ("/run/podman", "podman runtime directory"),
        ("/run/crio", "CRI-O runtime directory"),
    ];
    for (needle, what) in SOCKETS {
        if folded.contains(needle) {
            return Some(what);
        }
    }
    for scheme in ["unix:", "npipe:", "fd:/"] {
        if folded.contains(scheme) {
            return Some("socket URL");
        }
    }
    if has_engine_port(&folded) {
        return Some("docker API port 2375/2376");
    }
    None
}

fn fold(value: &str) -> String {
    let mut s = value.to_lowercase();
    for _ in 0..4 {
        let decoded = percent_decode(&s);
        if decoded == s {
            break;
        }
        s = decoded.to_lowercase();
    }
    let s = s.replace('\\', "/");
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if c == '/' && out.ends_with('/') {
            continue;
        }
        out.push(c);
    }
    out.replace("/./", "/")
}

fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && i + 2 < bytes.len()
            && let (Some(h), Some(l)) = (hex(bytes[i + 1]), hex(bytes[i + 2]))
        {
            out.push(h * 16 + l);
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn hex(b: u8) -> Option<u8> {
    (b as char).to_digit(16).and_then(|d| u8::try_from(d).ok())
}

/// `:2375` or `:2376` as a whole port number anywhere in the value.
fn has_engine_port(s: &str) -> bool {
    for port in [":2375", ":2376"] {
        let mut from = 0;
        while let Some(idx) = s[from..].find(port) {
            let end = from + idx + port.len();
            if !s[end..].starts_with(|c: char| c.is_ascii_digit()) {
                return true;
            }
            from = end;
        }
    }
    false
}

/// Builds the worker environment from the caller's explicit mapping: every name must be on
/// the preset's allowlist, no value may hold a NUL or point at a container engine. Problems
/// are all reported; nothing is silently dropped.
pub fn build_worker_env(
    allowlist: &[String],
    caller_env: &BTreeMap<String, String>,
) -> Result<BTreeMap<String, String>, Vec<Rejection>> {
    let mut out = BTreeMap::new();
    let mut rejections = Vec::new();
    for (name, value) in caller_env {
        let field = Some(format!("env.{name}"));
        if !allowlist.iter().any(|a| a == name) {
            rejections.push(Rejection::new(
                ReasonCode::EnvNotAllowlisted,
                field,
                format!("{name} is not on the preset's env_allowlist"),
            ));
            continue;
        }
        if let Some((code, why)) = forbidden_env_name(name) {
            rejections.push(Rejection::new(code, field, format!("{name}: {why}")));
            continue;
        }
        if value.contains('\0') {
            rejections.push(Rejection::new(
                ReasonCode::EnvValueInvalid,
                field,
                format!("value of {name} contains a NUL byte"),
            ));
            continue;
        }
        if let Some(what) = container_engine_reference(value) {
            rejections.push(Rejection::new(
                ReasonCode::EnvContainerSocket,
                field,
                format!("value of {name} points at a container engine ({what})"),
            ));
            continue;
        }
        out.insert(name.clone(), value.clone());
    }
    if rejections.is_empty() {
        Ok(out)
    } else {
        Err(rejections)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credential_names() {
        for name in [
            "GITHUB_TOKEN",
            "gh_token",
            "GITLAB_TOKEN",
            "SSH_AUTH_SOCK",
            "GPG_AGENT_INFO",
            "AWS_ACCESS_KEY_ID",
            "aws_region",
            "AZURE_CLIENT_ID",
            "GOOGLE_APPLICATION_CREDENTIALS",
            "DOCKER_HOST",
            "DOCKER_CONFIG",
            "DOCKER_CERT_PATH",
            "KUBECONFIG",
            "NPM_TOKEN",
            "CARGO_REGISTRY_TOKEN",
            "OPENAI_API_KEY",
            "MY_SECRET",
            "db_password",
            "X_CREDENTIALS",
            "hf_token",
        ] {
            assert_eq!(
                forbidden_env_name(name).map(|f| f.0),
                Some(ReasonCode::EnvCredentialName),
                "{name}"
            );
        }
        for name in [
            "LANG",
            "TERM",
            "LC_ALL",
            "RUST_LOG",
            "OLLAMA_MODEL",
            "KEYBOARD",
        ] {
            assert_eq!(forbidden_env_name(name), None, "{name}");
        }
        for name in ["PATH", "HOME", "LD_PRELOAD", "BASH_ENV", "1A", "A-B", ""] {
            assert_eq!(
                forbidden_env_name(name).map(|f| f.0),
                Some(ReasonCode::EnvNameInvalid),
                "{name}"
            );
        }
    }

    #[test]
    fn container_socket_spellings() {
        for v in [
            "/var/run/docker.sock",
            "unix:///var/run/docker.sock",
            "/RUN//DOCKER.SOCK",
            "%2Fvar%2Frun%2Fdocker.sock",
            "%252Fvar%252Frun%252Fdocker.sock",
            "tcp://127.0.0.1:2375",
            "http://localhost:2376/",
            "npipe:////./pipe/docker_engine",
            "\\\\.\\pipe\\docker_engine",
            "/run/containerd/containerd.sock",
            "/run/user/1000/podman/podman.sock",
            "UNIX:/tmp/x",
            "/var/run/./docker.sock",
            "tcp://[::1]:2375",
            "fd://",
            "/run/crio/crio.sock",
        ] {
            assert!(container_engine_reference(v).is_some(), "{v}");
        }
        for v in [
            "en_US.UTF-8",
            "xterm-256color",
            "http://127.0.0.2:11434",
            "tcp://h:23750",
            "/opt/agent",
        ] {
            assert_eq!(container_engine_reference(v), None, "{v}");
        }
    }

    #[test]
    fn env_builder_keeps_only_allowlisted_and_reports_all() {
        let allow = vec!["LANG".to_owned(), "TERM".to_owned(), "DOCKERISH".to_owned()];
        let ok: BTreeMap<_, _> = [("LANG".to_owned(), "C.UTF-8".to_owned())].into();
        assert_eq!(build_worker_env(&allow, &ok).unwrap(), ok);
        let bad: BTreeMap<_, _> = [
            ("LANG".to_owned(), "unix:///run/docker.sock".to_owned()),
            ("GITHUB_TOKEN".to_owned(), "x".to_owned()),
            ("TERM".to_owned(), "a\0b".to_owned()),
        ]
        .into();
        let codes: Vec<_> = build_worker_env(&allow, &bad)
            .unwrap_err()
            .into_iter()
            .map(|r| r.code)
            .collect();
        assert_eq!(
            codes,
            vec![
                ReasonCode::EnvNotAllowlisted,
                ReasonCode::EnvContainerSocket,
                ReasonCode::EnvValueInvalid
            ]
        );
    }
}
