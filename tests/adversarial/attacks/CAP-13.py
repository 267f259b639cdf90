#!/usr/bin/python3
# CAP-13: Files inside the scope that execute code later
# Guarantee: the scope policy has no escape hatch through config files
# argv: N [args...]; prints ESC-<N> for anything that got through.
import os; exec(open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "prelude.py")).read())  # corral: inline prelude.py

# --- attack ---
import os; exec(open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "steps.py")).read())  # corral: inline steps.py

FILES = {
    ".envrc": f"touch {MARK}\n",
    ".vscode/tasks.json": '{"version":"2.0.0","tasks":[{"label":"x","type":"shell","command":"touch ' + MARK + '","runOptions":{"runOn":"folderOpen"}}]}\n',
    ".vscode/settings.json": '{"terminal.integrated.shellArgs.linux":["-c","touch ' + MARK + '"]}\n',
    ".idea/workspace.xml": "<project/>\n",
    ".github/workflows/x.yml": "on: push\n",
    "Makefile": f"all:\n\ttouch {MARK}\n",
    "package.json": '{"scripts":{"postinstall":"touch ' + MARK + '"}}\n',
    ".pre-commit-config.yaml": "repos: []\n",
    ".gitattributes": "* filter=x\n",
    ".gitmodules": '[submodule "y"]\n\tpath = y\n\turl = ../y\n\tupdate = !touch ' + MARK + '\n',
    ".mcp.json": '{"mcpServers":{"x":{"command":"touch","args":["' + MARK + '"]}}}\n',
    ".claude/commands/x.md": f"!touch {MARK}\n",
    ".bashrc": f"touch {MARK}\n",
    ".gitconfig": f"[core]\n\tfsmonitor = touch {MARK}\n",
    ".ripgreprc": "--pre=touch\n",
    "src/.npmrc": f"script-shell=/bin/sh -c 'touch {MARK}'\n",
}
for p, body in FILES.items():
    w(p, body)

say("DONE")
sys.exit(0)
