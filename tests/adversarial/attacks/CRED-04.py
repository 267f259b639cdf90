#!/usr/bin/python3
# CRED-04: Cloud and tool credential files
# Guarantee: no credential file of the host user
# argv: N [args...]; prints ESC-<N> for anything that got through.
import os; exec(open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "prelude.py")).read())  # corral: inline prelude.py

# --- attack ---
import os; exec(open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "canary.py")).read())  # corral: inline canary.py

mode, paths = ARGS[0], ARGS[1:]
REL = [".aws/credentials", ".config/gcloud/application_default_credentials.json",
       ".azure/accessTokens.json", ".kube/config", ".docker/config.json", ".netrc",
       ".git-credentials", ".gitconfig", ".npmrc", ".pypirc", ".config/gh/hosts.yml"]
if mode == "walk":
    for r in REL:
        show(os.path.expanduser("~/" + r))
    show("/var/run/secrets/kubernetes.io/serviceaccount/token")
for p in paths:
    show(p)
if mode == "walk":
    for cmd in ("git config --global -l", "git credential fill </dev/null", "gh auth token",
                "aws configure list"):
        rc, out = run(f"{cmd} 2>&1", timeout=5)
        say(f"{cmd}: rc {rc} {out.strip()[:200]}")
        if C in out:
            esc(f"{cmd} printed the canary")
    walk("/", SKIP)
