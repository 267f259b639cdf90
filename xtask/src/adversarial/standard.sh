#!/usr/bin/env bash
# Hostile-fixture base repository for the adversarial cases (corpus section 9): tracks
# src/app.py, .github/workflows/ci.yml and .gitattributes, has a submodule vendor/lib whose
# git directory is .git/modules/vendor/lib, and a .git/config seeded with credentials the way
# CI checkouts leave them (CRED-05). Usage: standard.sh DEST NONCE. Prints the base commit.
set -euo pipefail
dest=$1
n=$2
export GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null
export GIT_AUTHOR_NAME=adv GIT_AUTHOR_EMAIL=adv@corral.invalid
export GIT_COMMITTER_NAME=adv GIT_COMMITTER_EMAIL=adv@corral.invalid
export GIT_AUTHOR_DATE=2026-01-01T00:00:00Z GIT_COMMITTER_DATE=2026-01-01T00:00:00Z
rm -rf "$dest"
mkdir -p "$dest"
cd "$dest"
git init -q -b main
mkdir -p src .github/workflows vendor
printf 'print("hello")\n' > src/app.py
printf 'on: push\njobs: {}\n' > .github/workflows/ci.yml
printf '*.py text\n' > .gitattributes
git init -q -b main vendor/lib
printf 'lib\n' > vendor/lib/lib.txt
git -C vendor/lib add lib.txt
git -C vendor/lib commit -q -m lib
sub=$(git -C vendor/lib rev-parse HEAD)
mkdir -p .git/modules/vendor
mv vendor/lib/.git .git/modules/vendor/lib
printf 'gitdir: ../../.git/modules/vendor/lib\n' > vendor/lib/.git
git config -f .git/modules/vendor/lib/config core.worktree ../../../../vendor/lib
printf '[submodule "vendor/lib"]\n\tpath = vendor/lib\n\turl = ./vendor-lib\n' > .gitmodules
git add src .github .gitattributes .gitmodules
git update-index --add --cacheinfo "160000,$sub,vendor/lib"
git commit -q -m base
git config "http.https://github.com/.extraheader" \
  "AUTHORIZATION: basic $(printf 'x-access-token:CANARY-%s' "$n" | base64 -w0)"
git config remote.origin.url "https://x-access-token:CANARY-$n@example.invalid/r.git"
git rev-parse HEAD
