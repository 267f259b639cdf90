//! NET: network enforcement (corpus §1).

use anyhow::Result;

use super::{judge_escapes, vars};
use crate::adversarial::case::{Case, Judge, Verdict};
use crate::adversarial::harness::{Control, Ctx, RunSpec};

pub fn cases() -> Vec<Case> {
    vec![Case {
        id: "NET-01",
        title: "TCP to the supervisor's loopback (mode none)",
        guarantee: "mode none allows no egress",
        script: Some(("py", NET_01)),
        judge: net_01,
    }]
}

pub fn extra_fixtures() -> Vec<(String, String, bool)> {
    Vec::new()
}

const NET_01: &str = r#"port = ARGS[0]
for fam, addr in (("4", "127.0.0.2"), ("4", "127.0.0.1"), ("6", "::1")):
    r = tryconnect(fam, addr, port)
    if r == "CONNECTED":
        esc(f"tcp connect {addr}:{port}")
    else:
        say(f"tcp {addr}:{port}: {r}")
rc, out = run(f"bash -c 'exec 3<>/dev/tcp/127.0.0.2/{port}' && echo OPENED")
if "OPENED" in out:
    esc(f"bash /dev/tcp 127.0.0.2:{port}")
"#;

fn net_01(ctx: &mut Ctx) -> Result<Verdict> {
    let (tally, port) = ctx.tcp_listener("127.0.0.2:0")?;
    let spec = RunSpec::new("NET-01.py").args(["{LPORT}"]);
    let v = vars([("LPORT", port.to_string())]);
    let run = ctx.run(&spec, &v)?;
    let inside = tally.hits();
    let ctl = ctx.control(&spec, &v, &Control::default())?;
    let mut j = Judge::new();
    judge_escapes(ctx, &run, &ctl, &["tcp connect 127.0.0.2"], &mut j);
    j.breach(
        inside > 0,
        format!("host listener saw {inside} connection(s) from the sandbox"),
    );
    j.control(
        tally.hits() > inside,
        "host listener saw the control's connection",
    );
    Ok(j.verdict())
}
