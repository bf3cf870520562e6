#!/bin/bash
# Verifier (binary): rebuild the same deterministic repo to learn the original commit ids,
# then check the refs, HEAD and the working tree of /app/repo.
set -u
mkdir -p /logs/verifier
echo 0.0 > /logs/verifier/reward.txt
ref=$(mktemp -d)
bash /tests/make_repo.sh "$ref/repo" >/dev/null 2>&1
# the lost commits are the dangling ones; find them by subject in the reference copy
find_commit() { git -C "$ref/repo" fsck --unreachable --no-reflogs 2>/dev/null | awk '/commit/{print $3}' |
  while read -r c; do [ "$(git -C "$ref/repo" log -1 --format=%s "$c")" = "$1" ] && echo "$c"; done; }
want_main=$(find_commit "Bump version to 1.4.1")
want_retry=$(find_commit "retry: add exponential backoff")
echo "expected main=$want_main feature/retry=$want_retry"
cd /app/repo || { echo "FAIL: /app/repo missing"; exit 0; }
[ -d .git ] && [ ! -L .git ] || { echo "FAIL: /app/repo/.git is not a folder"; exit 0; }
# The repository is the agent's work: git must run none of the programs its config could name
# (core.fsmonitor, clean/smudge filters, hooks; a commondir's config). It gets a config of the
# verifier's own; objects, refs, HEAD and the index are what is checked.
rm -rf .git/hooks .git/info/attributes .git/commondir .git/config.worktree
printf '[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n\tbare = false\n' > .git/config
git() { GIT_CONFIG_NOSYSTEM=1 command git -c safe.directory=/app/repo -c core.fsmonitor=false \
  -c core.hooksPath=/dev/null "$@"; }
pass=1
got_main=$(git rev-parse -q --verify refs/heads/main)
got_retry=$(git rev-parse -q --verify refs/heads/feature/retry)
head_ref=$(git symbolic-ref -q HEAD)
dirty=$(git status --porcelain)
[ -n "$want_main" ] && [ "$got_main" = "$want_main" ] && echo "PASS: main -> $got_main" || { echo "FAIL: main -> '$got_main'"; pass=0; }
[ -n "$want_retry" ] && [ "$got_retry" = "$want_retry" ] && echo "PASS: feature/retry -> $got_retry" || { echo "FAIL: feature/retry -> '$got_retry'"; pass=0; }
[ "$head_ref" = "refs/heads/main" ] && echo "PASS: HEAD is main" || { echo "FAIL: HEAD is '$head_ref'"; pass=0; }
[ -z "$dirty" ] && echo "PASS: clean working tree" || { echo "FAIL: working tree not clean:"; echo "$dirty"; pass=0; }
[ "$pass" = 1 ] && echo 1.0 > /logs/verifier/reward.txt
cat /logs/verifier/reward.txt
