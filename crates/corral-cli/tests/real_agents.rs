//! Issue 14: real agents, unmodified, from the registries (installed and pinned by
//! `scripts/setup.sh`), each inside `corral run` against a scripted model upstream served over
//! TLS on the host's loopback with a test CA, reached only through corral's credential broker
//! (ADR-0095). Each fixes a planted bug; its patch passes `git apply --check` on a fresh clone
//! and `corral verify`; the real key (a canary) reaches the upstream and nothing the agent
//! could read; call N+1 past the budget is refused.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code"
)]

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::{Value, json};

mod common;
use common::{
    clone_repo, fixture, git, installed, response_stream, run_command, work_unit, write_documents,
};

const CANARY: &str = "sk-canary-real-agent-93c1f07d";
const FIXED: &str = "def add(a, b):\n    return a + b\n";

fn manifest_path(artifacts: &Path, m: &Value) -> PathBuf {
    let mut c = Command::new("sha256sum")
        .arg("-")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    c.stdin
        .take()
        .unwrap()
        .write_all(serde_json::to_string(m).unwrap().as_bytes())
        .unwrap();
    let digest = String::from_utf8(c.wait_with_output().unwrap().stdout).unwrap()[..64].to_owned();
    artifacts.join("sha256").join(digest)
}

fn all_bytes_under(dir: &Path, out: &mut Vec<u8>) {
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            all_bytes_under(&p, out);
        } else if let Ok(b) = std::fs::read(&p) {
            out.extend_from_slice(&b);
        }
    }
}

/// A chat completion that asks for one bash tool call (mini-swe-agent 2's protocol).
fn tool_call(n: usize, command: &str) -> String {
    json!({
        "id": format!("chatcmpl-{n}"), "object": "chat.completion", "created": 0,
        "model": "gpt-test",
        "choices": [ { "index": 0, "finish_reason": "tool_calls", "message": {
            "role": "assistant", "content": "Running a command.",
            "tool_calls": [ { "id": format!("call_{n}"), "type": "function", "function": {
                "name": "bash", "arguments": json!({ "command": command }).to_string() } } ] } } ],
        "usage": { "prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15 }
    })
    .to_string()
}

/// One `corral run` of a real agent with its shipped preset against a fresh scripted
/// upstream (fix the bug, dump what the agent can read, finish) with a call budget of `calls`.
struct AgentRun {
    f: common::Fixture,
    artifacts: PathBuf,
    code: Option<i32>,
    corral_output: String,
    manifest: Value,
    seen: Vec<String>,
    stored: String,
}

/// How one agent is run: its name (pins and shipped preset), the install root its shipped
/// preset names, the model path it calls, and its scripted model's n-th answer.
struct Agent {
    name: &'static str,
    /// The connection the shipped preset names.
    connection: &'static str,
    shipped_root: &'static str,
    /// The upstream's base path, and the path prefix the agent calls below it.
    base_path: &'static str,
    path_prefix: &'static str,
    /// The credential header and scheme the upstream takes.
    header: &'static str,
    scheme: &'static str,
    /// What the agent's view (`DUMP`) must show, proving it was taken: the run's token in
    /// the variable the preset puts it in, or (codex, whose process is not dumpable and
    /// whose shells get no key-named variables) its HOME config with the endpoint filled in.
    view_marker: &'static str,
    answer: fn(usize, &str) -> String,
    /// The WorkUnit's objective.
    objective: fn() -> String,
    /// What the agent prints when it has done the scripted work.
    done_marker: &'static str,
    /// The calls the scripted model takes to fix the bug (the budget of the fixing run).
    fix_calls: u64,
    /// The calls the scripted model may spend waiting for a slow command (codex's
    /// `write_stdin`), beyond `fix_calls`; in the fixing run's budget.
    max_polls: u64,
    /// Whether the agent exits non-zero when a model call is refused (aider reports the
    /// error and exits 0, as it does for any model error).
    fails_when_refused: bool,
}

const OBJECTIVE: &str = "add() in src/calc.py subtracts; make it add";

fn objective() -> String {
    OBJECTIVE.to_owned()
}

/// What the agent can read that could hold a key: its shell's environment, every process's
/// environment and argv (the agent's own among them: the sandbox has its own PID namespace),
/// the files in HOME and /tmp. Written into the workspace as text, so the candidate carries
/// it out (agents differ in what they print).
const DUMP: &str = "{ env; for p in /proc/[0-9]*; do tr '\\0' '\\n' < $p/environ; \
                    tr '\\0' ' ' < $p/cmdline; echo; done; \
                    find \"$HOME\" /tmp -type f -exec sh -c \
                    'for f; do echo \"== $f\"; head -c 4096 \"$f\"; echo; done' sh {} +; \
                    } 2>&1 | tr -c '[:print:]\\n' '?' > src/agent-view.txt; cat src/calc.py";
const FIX: &str = "sed -i 's/a - b/a + b/' src/calc.py";

fn mini_answer(n: usize, _: &str) -> String {
    match n {
        1 => tool_call(n, FIX),
        2 => tool_call(n, DUMP),
        _ => tool_call(n, "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"),
    }
}

const MINI: Agent = Agent {
    name: "mini-swe-agent",
    connection: "openai",
    shipped_root: "/opt/mini-swe-agent",
    base_path: "/v1",
    path_prefix: "/chat/completions",
    header: "Authorization",
    scheme: "Bearer",
    view_marker: "OPENAI_API_KEY=corral-",
    answer: mini_answer,
    objective,
    done_marker: "COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT",
    fix_calls: 3,
    max_polls: 0,
    fails_when_refused: true,
};

/// codex's scripted model: the fix, the dump, then done, each step chosen from the request's
/// history (as a model reads it), not from the call's number. codex 0.169's `exec_command`
/// answers after 10 s with the process still running (a session id) however long it takes:
/// under emulation the dump can take longer, and a model that ended the turn then would have
/// codex end the dump half written, so it waits for the command with `write_stdin`, as a
/// model does. Those waits are calls too: `max_polls` in the budget.
fn codex_answer(n: usize, body: &str) -> String {
    let req: Value = serde_json::from_str(body).unwrap_or(Value::Null);
    let items: &[Value] = req["input"].as_array().map_or(&[], Vec::as_slice);
    let exec = body.contains("\"exec_command\"");
    // codex 0.169 offers `exec_command` (`cmd`); older ones `shell` (`command`, an argv).
    let run = |cmd: &str| {
        let (name, args) = if exec {
            ("exec_command", json!({ "cmd": cmd }))
        } else {
            ("shell", json!({ "command": ["bash", "-lc", cmd] }))
        };
        json!({ "type": "function_call", "name": name, "call_id": format!("call_{n}"),
                "arguments": args.to_string() })
    };
    // The last command's result: still running (a session to wait on), or done.
    let running = items
        .iter()
        .rev()
        .find(|i| i["type"] == "function_call_output")
        .map(|i| i["output"].to_string())
        .and_then(|out| {
            const RUNNING: &str = "Process running with session ID ";
            let at = out.find(RUNNING)? + RUNNING.len();
            let id: String = out[at..].chars().take_while(char::is_ascii_digit).collect();
            id.parse::<u64>().ok()
        });
    if let Some(session) = running {
        let args = json!({ "session_id": session, "chars": "", "yield_time_ms": 30000 });
        return response_stream(
            n,
            &json!({ "type": "function_call", "name": "write_stdin",
                     "call_id": format!("call_{n}"), "arguments": args.to_string() }),
        );
    }
    let asked = |cmd: &str| {
        items.iter().any(|i| {
            let args = i["arguments"].as_str().unwrap_or_default();
            i["type"] == "function_call"
                && serde_json::from_str::<Value>(args)
                    .is_ok_and(|a| a["cmd"] == cmd || a["command"][2] == cmd)
        })
    };
    if !asked(FIX) {
        response_stream(n, &run(FIX))
    } else if !asked(DUMP) {
        response_stream(n, &run(DUMP))
    } else {
        response_stream(
            n,
            &json!({ "type": "message", "role": "assistant", "id": format!("msg_{n}"),
                     "content": [ { "type": "output_text",
                                    "text": "COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT" } ] }),
        )
    }
}

const CODEX: Agent = Agent {
    name: "codex",
    connection: "openai",
    shipped_root: "/opt/codex",
    base_path: "/v1",
    path_prefix: "/responses",
    header: "Authorization",
    scheme: "Bearer",
    view_marker: "base_url = \"http://127.0.0.1:3129\"",
    answer: codex_answer,
    objective,
    done_marker: "COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT",
    fix_calls: 3,
    max_polls: 8,
    fails_when_refused: true,
};

/// One streamed Gemini API answer (gemini-cli's protocol): one server-sent event.
fn gemini_stream(part: &Value) -> String {
    let r = json!({
        "candidates": [ { "content": { "parts": [part], "role": "model" },
                          "finishReason": "STOP", "index": 0 } ],
        "usageMetadata": { "promptTokenCount": 10, "candidatesTokenCount": 5,
                           "totalTokenCount": 15 }
    });
    format!("data: {r}\n\n")
}

fn gemini_answer(n: usize, _: &str) -> String {
    let run = |cmd: &str| json!({ "functionCall": { "name": "run_shell_command", "args": { "command": cmd } } });
    match n {
        1 => gemini_stream(&run(FIX)),
        2 => gemini_stream(&run(DUMP)),
        _ => gemini_stream(&json!({ "text": "COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT" })),
    }
}

const GEMINI: Agent = Agent {
    name: "gemini-cli",
    connection: "gemini",
    shipped_root: "/opt/gemini-cli",
    base_path: "",
    path_prefix: "/v1beta/models",
    header: "x-goog-api-key",
    scheme: "",
    view_marker: "GEMINI_API_KEY=corral-",
    answer: gemini_answer,
    objective,
    done_marker: "COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT",
    fix_calls: 3,
    max_polls: 0,
    fails_when_refused: true,
};

/// One streamed chat completion: `delta` in one chunk, then the end with `finish`.
fn chat_chunks(n: usize, delta: &Value, finish: &str) -> String {
    let chunk = |delta: &Value, finish: Value| {
        json!({ "id": format!("chatcmpl-{n}"), "object": "chat.completion.chunk", "created": 0,
                "model": "gpt-test",
                "choices": [ { "index": 0, "delta": delta, "finish_reason": finish } ] })
    };
    format!(
        "data: {}\n\ndata: {}\n\ndata: [DONE]\n\n",
        chunk(delta, Value::Null),
        chunk(&json!({}), json!(finish))
    )
}

/// One streamed chat completion (aider's protocol through litellm): the text in one chunk.
fn chat_stream(n: usize, text: &str) -> String {
    chat_chunks(n, &json!({ "role": "assistant", "content": text }), "stop")
}

/// An edit in aider's `diff` format (the shipped preset's `--edit-format`).
fn search_replace(from: &str, to: &str) -> String {
    format!("src/calc.py\n```python\n<<<<<<< SEARCH\n{from}\n=======\n{to}\n>>>>>>> REPLACE\n```\n")
}

/// aider runs no command a model asks for under `--yes-always` (it needs an explicit yes),
/// so the objective is the user's own `/test`: aider runs the dump, which fails on purpose,
/// and sends its output to the model as the first message. The first answer's edit leaves
/// a name undefined; aider's own lint sends the error back (call 2); the second answer fixes.
fn aider_objective() -> String {
    format!("/test {DUMP}; exit 1")
}

fn aider_answer(n: usize, _: &str) -> String {
    match n {
        1 => chat_stream(n, &search_replace("    return a - b", "    return a + bb")),
        _ => chat_stream(n, &search_replace("    return a + bb", "    return a + b")),
    }
}

const AIDER: Agent = Agent {
    name: "aider",
    connection: "openai",
    shipped_root: "/opt/aider",
    base_path: "/v1",
    path_prefix: "/chat/completions",
    header: "Authorization",
    scheme: "Bearer",
    view_marker: "OPENAI_API_KEY=corral-",
    answer: aider_answer,
    objective: aider_objective,
    done_marker: "Applied edit to src/calc.py",
    fix_calls: 2,
    max_polls: 0,
    fails_when_refused: false,
};

/// One streamed chat completion that asks for one tool call (goose's protocol).
fn chat_tool_stream(n: usize, tool: &str, command: &str) -> String {
    let call = json!({ "index": 0, "id": format!("call_{n}"), "type": "function",
                       "function": { "name": tool,
                                     "arguments": json!({ "command": command }).to_string() } });
    chat_chunks(
        n,
        &json!({ "role": "assistant", "content": null, "tool_calls": [call] }),
        "tool_calls",
    )
}

/// goose's scripted model: the step follows from the tool results the request carries (its
/// developer extension's shell tool is `shell` in 1.52; the name is taken from the offer).
fn goose_answer(n: usize, body: &str) -> String {
    let req: Value = serde_json::from_str(body).unwrap_or(Value::Null);
    let tool = req["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t["function"]["name"].as_str())
        .find(|name| *name == "shell" || name.ends_with("__shell"))
        .unwrap_or("shell")
        .to_owned();
    let results = req["messages"]
        .as_array()
        .map_or(0, |m| m.iter().filter(|m| m["role"] == "tool").count());
    match results {
        0 => chat_tool_stream(n, &tool, FIX),
        1 => chat_tool_stream(n, &tool, DUMP),
        _ => chat_stream(n, "COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"),
    }
}

const GOOSE: Agent = Agent {
    name: "goose",
    connection: "openai",
    shipped_root: "/opt/goose",
    base_path: "/v1",
    path_prefix: "/chat/completions",
    header: "Authorization",
    scheme: "Bearer",
    view_marker: "OPENAI_API_KEY=corral-",
    answer: goose_answer,
    objective,
    done_marker: "COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT",
    fix_calls: 3,
    max_polls: 0,
    fails_when_refused: true,
};

fn run_agent(agent: &Agent, tag: &str, calls: u64, env: &[(&str, &str)]) -> AgentRun {
    let root = installed(agent.name);
    let f = fixture(tag);
    std::fs::write(
        f.repo.join("src/calc.py"),
        "def add(a, b):\n    return a - b\n",
    )
    .unwrap();
    git(&f.repo, &["add", "-A"]);
    git(&f.repo, &["commit", "-q", "-m", "planted bug"]);
    let base = git(&f.repo, &["rev-parse", "HEAD"]);
    let (port, ca_pem, seen) = common::tls::upstream(agent.answer);
    let secrets = f.dir.join("secrets");
    std::fs::create_dir_all(&secrets).unwrap();
    std::fs::write(secrets.join("model.key"), format!("{CANARY}\n")).unwrap();
    std::fs::write(secrets.join("ca.pem"), &ca_pem).unwrap();
    let connections = json!({
        "schema_version": "corral.connections/v1",
        "connections": { agent.connection: {
            // The broker is the only way out: no destination for the proxy.
            "destinations": [],
            "upstream": {
                "base_url": format!("https://127.0.0.1:{port}{}", agent.base_path),
                "methods": ["POST"], "path_prefixes": [agent.path_prefix],
                "credential": { "file": secrets.join("model.key").to_str().unwrap() },
                "credential_header": agent.header, "credential_scheme": agent.scheme,
                "ca_file": secrets.join("ca.pem").to_str().unwrap(),
                "budgets": { "calls": calls, "request_bytes": 16777216,
                             "response_bytes": 16777216, "call_seconds": 60,
                             "total_seconds": 600 }
            }
        } }
    });
    let mut wu = work_unit(&f, 300, 300, 2 << 30);
    wu["repository"]["base_sha"] = json!(base);
    wu["permissions"]["network"] = json!("allowlist");
    wu["permissions"]["network_allowlist"] = json!([]);
    wu["budget"]["max_output_bytes"] = json!(4 << 20);
    wu["budget"]["max_patch_bytes"] = json!(4 << 20);
    wu["budget"]["disk_bytes"] = json!(256u64 << 20);
    wu["budget"]["max_processes"] = json!(256);
    wu["objective"] = json!((agent.objective)());
    // The shipped preset, as shipped: only its install root is where setup.sh put it.
    let shipped = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join(format!("../../examples/presets/{}.json", agent.name));
    let text = std::fs::read_to_string(&shipped)
        .unwrap()
        .replace(agent.shipped_root, root.to_str().unwrap());
    let mut preset: Value = serde_json::from_str(&text).unwrap();
    for (k, v) in env {
        preset["env"][*k] = json!(v);
    }
    let (wu_path, pr_path, cn_path) = write_documents(&f, &wu, &preset, &connections);
    let artifacts = f.dir.join("artifacts");
    let out = run_command(&f, &wu_path, &pr_path, &f.repo, &artifacts)
        .arg("--connections")
        .arg(&cn_path)
        .arg("--json")
        .output()
        .unwrap();
    let corral_output = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let manifest: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("no manifest ({e}): {corral_output}"));
    let mut stored = Vec::new();
    all_bytes_under(&artifacts, &mut stored);
    let seen = seen.lock().unwrap().clone();
    AgentRun {
        f,
        artifacts,
        code: out.status.code(),
        corral_output,
        manifest,
        seen,
        stored: String::from_utf8_lossy(&stored).into_owned(),
    }
}

/// The agent fixes the bug through the broker; the patch applies and verifies; the key
/// reaches the upstream on each call and nothing the agent can read.
fn fixes_a_bug_through_the_broker(agent: &Agent) {
    let r = run_agent(agent, agent.name, agent.fix_calls + agent.max_polls, &[]);
    let m = &r.manifest;
    let made = r.seen.len() as u64;
    assert!(
        (agent.fix_calls..=agent.fix_calls + agent.max_polls).contains(&made),
        "{made} calls, {} to fix and at most {} waits: {:?}\n{}",
        agent.fix_calls,
        agent.max_polls,
        r.seen,
        r.stored
    );
    for head in &r.seen {
        assert!(
            head.starts_with(&format!("POST {}{}", agent.base_path, agent.path_prefix)),
            "{head}"
        );
        let credential = if agent.scheme.is_empty() {
            format!("{}: {CANARY}\r\n", agent.header)
        } else {
            format!("{}: {} {CANARY}\r\n", agent.header, agent.scheme)
        };
        assert!(head.contains(&credential), "{head}");
        assert!(!head.contains("corral-"), "{head}");
    }
    let calls = m["model_calls"].as_array().expect("no model_calls");
    assert_eq!(calls.len() as u64, made, "{calls:?}");
    assert!(
        calls
            .iter()
            .all(|c| c["status"] == 200 && c["forwarded"] == true)
    );

    // The fix is the candidate; it applies to a fresh clone; corral verify passes.
    assert_eq!(r.code, Some(0), "{}\n{}", r.corral_output, r.stored);
    assert_eq!(m["outcome"], "candidate_captured");
    let digest = m["candidate"]["patch"]["digest"]
        .as_str()
        .unwrap()
        .trim_start_matches("sha256:")
        .to_owned();
    let patch = r.artifacts.join("sha256").join(&digest);
    let clone = clone_repo(&r.f);
    git(&clone, &["apply", "--check", patch.to_str().unwrap()]);
    git(&clone, &["apply", patch.to_str().unwrap()]);
    assert_eq!(
        std::fs::read_to_string(clone.join("src/calc.py")).unwrap(),
        FIXED
    );
    let v = Command::new(env!("CARGO_BIN_EXE_corral"))
        .arg("verify")
        .arg(manifest_path(&r.artifacts, m))
        .output()
        .unwrap();
    assert_eq!(
        v.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&v.stderr)
    );

    // The agent ran the scripted commands with the token in its environment (the dump shows
    // it), and the key is nowhere it printed, nor in corral's output.
    assert!(r.stored.contains(agent.done_marker), "{}", r.stored);
    assert!(
        r.stored.contains(agent.view_marker),
        "the dump of the agent's environment is missing: {}",
        r.stored
    );
    assert!(
        !r.stored.contains(CANARY),
        "the key reached the agent's output"
    );
    assert!(!r.corral_output.contains(CANARY));
}

/// Call N+1 past the budget is refused with an error the agent shows, and the upstream
/// never sees it.
fn is_refused_past_its_call_budget(agent: &Agent, env: &[(&str, &str)]) {
    let r = run_agent(agent, &format!("{}-budget", agent.name), 1, env);
    assert_eq!(r.seen.len(), 1, "{:?}", r.seen);
    let calls = r.manifest["model_calls"]
        .as_array()
        .expect("no model_calls");
    assert_eq!(
        (calls[0]["status"].as_u64(), calls[0]["forwarded"].as_bool()),
        (Some(200), Some(true)),
        "{calls:?}"
    );
    assert!(calls.len() >= 2, "{calls:?}\n{}", r.stored);
    assert!(
        calls[1..]
            .iter()
            .all(|c| c["status"] == 403 && c["forwarded"] == false && c["stopped_by"] == "calls"),
        "{calls:?}"
    );
    assert!(
        r.stored.contains("model call budget is spent"),
        "the agent did not show the refusal: {}",
        r.stored
    );
    if agent.fails_when_refused {
        assert_ne!(r.code, Some(0), "{}", r.corral_output);
    }
    assert!(!r.stored.contains(CANARY));
}

#[test]
fn mini_swe_agent_fixes_a_bug_through_the_broker() {
    fixes_a_bug_through_the_broker(&MINI);
}

/// mini-swe-agent's own retries off, as a preset under a small call budget would set them
/// (it retries a refused call for minutes otherwise).
#[test]
fn mini_swe_agent_past_its_call_budget_is_refused() {
    is_refused_past_its_call_budget(&MINI, &[("MSWEA_MODEL_RETRY_STOP_AFTER_ATTEMPT", "1")]);
}

#[test]
fn codex_fixes_a_bug_through_the_broker() {
    fixes_a_bug_through_the_broker(&CODEX);
}

#[test]
fn codex_past_its_call_budget_is_refused() {
    is_refused_past_its_call_budget(&CODEX, &[]);
}

#[test]
fn gemini_cli_fixes_a_bug_through_the_broker() {
    fixes_a_bug_through_the_broker(&GEMINI);
}

#[test]
fn gemini_cli_past_its_call_budget_is_refused() {
    is_refused_past_its_call_budget(&GEMINI, &[]);
}

#[test]
fn aider_fixes_a_bug_through_the_broker() {
    fixes_a_bug_through_the_broker(&AIDER);
}

#[test]
fn aider_past_its_call_budget_is_refused() {
    is_refused_past_its_call_budget(&AIDER, &[]);
}

#[test]
fn goose_fixes_a_bug_through_the_broker() {
    fixes_a_bug_through_the_broker(&GOOSE);
}

#[test]
fn goose_past_its_call_budget_is_refused() {
    is_refused_past_its_call_budget(&GOOSE, &[]);
}
