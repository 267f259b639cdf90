//! The bundled demo agent: a small deterministic program that behaves like a coding agent, so
//! `corral demo` can show the whole path without a model.
//!
//! It reads its objective from stdin, fixes the off-by-one in `src/range.py` of the demo
//! repository, adds a test under `tests/`, runs a command (`/bin/sh -c 'wc -l ...'`), prints what
//! it did, and exits 0. It never looks outside its working directory.

use std::io::Read;
use std::path::Path;
use std::process::Command;

/// Runs the demo agent in the current directory; returns the process exit code.
pub fn run() -> u8 {
    let mut objective = String::new();
    if std::io::stdin().read_to_string(&mut objective).is_err() {
        eprintln!("demo-agent: cannot read the objective from stdin");
        return 1;
    }
    out!(
        "demo-agent: objective: {}",
        crate::display::escape(objective.trim())
    );
    let src = Path::new("src/range.py");
    let text = match std::fs::read_to_string(src) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("demo-agent: cannot read {}: {e}", src.display());
            return 1;
        }
    };
    let fixed = text.replace("list(range(start, end))", "list(range(start, end + 1))");
    if fixed == text {
        out!("demo-agent: src/range.py already includes the end; nothing to fix");
    } else if let Err(e) = std::fs::write(src, fixed) {
        eprintln!("demo-agent: cannot write {}: {e}", src.display());
        return 1;
    } else {
        out!("demo-agent: fixed the off-by-one in src/range.py");
    }
    let test = "from src.range import inclusive_range\n\n\ndef test_includes_end():\n    assert inclusive_range(1, 3) == [1, 2, 3]\n";
    if let Err(e) =
        std::fs::create_dir_all("tests").and_then(|()| std::fs::write("tests/test_range.py", test))
    {
        eprintln!("demo-agent: cannot write tests/test_range.py: {e}");
        return 1;
    }
    out!("demo-agent: added tests/test_range.py");
    match Command::new("/bin/sh")
        .args(["-c", "wc -l src/range.py tests/test_range.py"])
        .output()
    {
        Ok(out) => {
            out_raw!("{}", String::from_utf8_lossy(&out.stdout));
            out!(
                "demo-agent: command exited {}",
                out.status.code().unwrap_or(-1)
            );
        }
        Err(e) => {
            eprintln!("demo-agent: cannot run /bin/sh: {e}");
            return 1;
        }
    }
    out!("demo-agent: done");
    0
}
