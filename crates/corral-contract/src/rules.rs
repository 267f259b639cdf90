//! The lists admission's rules are written with, shared with the input JSON Schemas.
//!
//! `corral-admission` decides what is admissible; the generated schemas (feature `schema`)
//! state the same rules wherever JSON Schema can. These are the lists both need. They mirror
//! corral-admission's own lists, and its `tests/schema_corpus.rs` fails when they differ.

/// Environment names corral sets itself inside the sandbox, so a preset may not allowlist
/// them (`env_name_invalid`; compared ignoring ASCII case).
pub const RESERVED_ENV_NAMES: &[&str] = &[
    "PATH",
    "HOME",
    "TMPDIR",
    "PWD",
    "USER",
    "LOGNAME",
    "SHELL",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "ALL_PROXY",
    "NO_PROXY",
];

/// Environment names that change how the loader or a shell runs code before the worker's
/// own (`env_name_invalid`; compared ignoring ASCII case).
pub const CODE_INJECTION_ENV_NAMES: &[&str] = &[
    "LD_PRELOAD",
    "LD_LIBRARY_PATH",
    "LD_AUDIT",
    "BASH_ENV",
    "ENV",
    "PROMPT_COMMAND",
    "PYTHONSTARTUP",
    "NODE_OPTIONS",
    "PERL5OPT",
    "RUBYOPT",
];

/// Every environment name that starts with this (ignoring ASCII case) is a loader setting
/// (`env_name_invalid`).
pub const CODE_INJECTION_ENV_PREFIX: &str = "LD_";

/// Environment names that carry credentials (`env_credential_name`; compared ignoring ASCII
/// case).
pub const CREDENTIAL_ENV_NAMES: &[&str] = &[
    "GITHUB_TOKEN",
    "GH_TOKEN",
    "GITLAB_TOKEN",
    "SSH_AUTH_SOCK",
    "SSH_AGENT_PID",
    "GPG_AGENT_INFO",
    "GOOGLE_APPLICATION_CREDENTIALS",
    "DOCKER_HOST",
    "DOCKER_CONFIG",
    "DOCKER_CERT_PATH",
    "DOCKER_CONTEXT",
    "CONTAINER_HOST",
    "KUBECONFIG",
    "NPM_TOKEN",
    "CARGO_REGISTRY_TOKEN",
    "NETRC",
    "GIT_ASKPASS",
    "SSH_ASKPASS",
    "VAULT_ADDR",
];

/// Prefixes of credential-bearing environment names (`env_credential_name`; ignoring ASCII
/// case).
pub const CREDENTIAL_ENV_PREFIXES: &[&str] =
    &["AWS_", "AZURE_", "GOOGLE_CLOUD_", "GCLOUD_", "CLOUDSDK_"];

/// Suffixes of secret-like environment names (`env_credential_name`; ignoring ASCII case).
pub const CREDENTIAL_ENV_SUFFIXES: &[&str] = &[
    "_TOKEN",
    "_SECRET",
    "_PASSWORD",
    "_KEY",
    "_CREDENTIALS",
    "_PASSWD",
    "_PASSPHRASE",
];

/// Longest environment name a preset may allowlist, in bytes.
pub const MAX_ENV_NAME_BYTES: usize = 256;

/// Host trees a preset's `read_only_paths` may never name, nor anything below them
/// (`read_only_path_invalid`): they hold the host's processes, devices, sockets, users'
/// homes, temporary files and configuration.
pub const HIDDEN_HOST_TREES: &[&str] = &[
    "/proc",
    "/sys",
    "/dev",
    "/run",
    "/var/run",
    "/home",
    "/root",
    "/tmp",
    "/var/tmp",
    "/etc",
    "/boot",
    "/mnt",
    "/media",
    "/srv",
    "/var/lib/docker",
    "/var/lib/containerd",
];

/// Longest WorkUnit or AgentPreset `id`, in bytes (`id_invalid`).
pub const MAX_ID_BYTES: usize = 200;
