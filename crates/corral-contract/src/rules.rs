//! The lists admission's rules are written with, shared with the input JSON Schemas.
//!
//! `corral-admission` decides what is admissible; the generated schemas (feature `schema`)
//! state the same rules wherever JSON Schema can. These are the lists both need. They mirror
//! corral-admission's own lists, and its `tests/schema_corpus.rs` fails when they differ.

/// The most bytes one value of a preset's `env` may hold.
pub const MAX_PRESET_ENV_VALUE_BYTES: usize = 32 << 10;

/// Values of a preset's `env` and its HOME files may hold this only in the placeholders
/// corral fills in, `{model_base_url}` and `{model_token}` (the credential broker's endpoint
/// and the run's token, ADR-0095), and only where the broker serves the run
/// (`env_value_invalid`, `home_file_invalid`).
pub const RESERVED_PLACEHOLDER_PREFIX: &str = "{model_";

/// The most files a preset may place in the worker's HOME.
pub const MAX_HOME_FILES: usize = 64;

/// The most bytes one of a preset's `home_files` may hold.
pub const MAX_HOME_FILE_BYTES: usize = 1 << 20;

/// The most bytes a preset's `home_files` may hold together (they also count against the
/// WorkUnit's `disk_bytes`).
pub const MAX_HOME_FILES_BYTES: usize = 4 << 20;

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

/// Methods a model upstream's broker may forward (`model_upstream_invalid` otherwise).
pub const MODEL_UPSTREAM_METHODS: &[&str] = &["GET", "POST", "PUT", "PATCH", "DELETE"];

/// Headers a broker sets or drops itself, so a connection may not name one as its
/// credential header (`model_upstream_invalid`; compared ignoring ASCII case).
pub const MODEL_UPSTREAM_RESERVED_HEADERS: &[&str] = &[
    "connection",
    "proxy-connection",
    "keep-alive",
    "proxy-authorization",
    "proxy-authenticate",
    "te",
    "trailer",
    "upgrade",
    "host",
    "expect",
    "content-length",
    "transfer-encoding",
];

/// A URL path every reader reads the same way: `/`, then printable ASCII without `%` (no
/// encoded `/` or `.`), `\`, `//`, or a `.` or `..` segment; at most 2048 bytes. The broker
/// forwards only such paths, and a connection's base path and prefixes are such paths.
#[must_use]
pub fn is_plain_url_path(path: &str) -> bool {
    path.starts_with('/')
        && path.len() <= 2048
        && path
            .bytes()
            .all(|b| b.is_ascii_graphic() && b != b'%' && b != b'\\' && b != b'?' && b != b'#')
        && !path.contains("//")
        && path.split('/').all(|s| s != "." && s != "..")
}

/// An HTTP token (RFC 9110 5.6.2): a header name or an auth scheme.
#[must_use]
pub fn is_http_token(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 64
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}
