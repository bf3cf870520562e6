#!/bin/bash
# Verifier: partial credit, 0.25 for each of the four requirements in instruction.md.
# /logs and /logs/verifier are made root-only first, so nothing the agent's code runs (its unit
# tests run as `nobody` in check_merge.py) can write the reward or swap the folder.
set -u
mkdir -p /logs/verifier
chmod 755 /logs /logs/verifier
rm -f /logs/verifier/reward.json
echo 0.0 > /logs/verifier/reward.txt
# The repository is the agent's work: git must run none of the programs its config could name
# (core.fsmonitor, clean/smudge filters, hooks; a commondir's config). It gets a config of the
# verifier's own; objects, refs, HEAD and the index are what is checked.
if [ -d /app/service/.git ] && [ ! -L /app/service/.git ]; then
  rm -rf /app/service/.git/hooks /app/service/.git/info/attributes /app/service/.git/commondir \
    /app/service/.git/config.worktree /app/service/.git/config
  printf '[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n\tbare = false\n' \
    > /app/service/.git/config
  python3 -I /tests/check_merge.py
else
  echo "FAIL: /app/service/.git is not a folder"
fi
rm -f /logs/verifier/reward.json
cat /logs/verifier/reward.txt
