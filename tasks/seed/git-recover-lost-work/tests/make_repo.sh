#!/bin/bash
# Build the demo repository deterministically (fixed identities and dates => fixed hashes),
# then simulate the accident: delete a branch and hard-reset main.
set -euo pipefail
dir=$1
mkdir -p "$dir" && cd "$dir"
export GIT_AUTHOR_NAME="Dana Dev" GIT_AUTHOR_EMAIL="dana@example.com"
export GIT_COMMITTER_NAME="Dana Dev" GIT_COMMITTER_EMAIL="dana@example.com"
n=0
commit() {
  n=$((n + 1))
  export GIT_AUTHOR_DATE="@$((1712000000 + n * 3600)) +0000" GIT_COMMITTER_DATE="@$((1712000000 + n * 3600)) +0000"
  git add -A && git commit -q -m "$1"
}
git init -q -b main .
git config user.name "Dana Dev"; git config user.email "dana@example.com"
printf '# pager\n\nSplits result lists into pages.\n' > README.md
cat > pager.py <<'PY'
def page(items, size, number):
    """Return page `number` (1-based) of `items`."""
    start = number * size
    return items[start:start + size]
PY
commit "Initial commit"
printf 'import json\n\ndef load(path):\n    with open(path) as f:\n        return json.load(f)\n' > config.py
commit "Add config loader"
printf 'import sys\nfrom pager import page\n\nif __name__ == "__main__":\n    print(page(sys.argv[2:], int(sys.argv[1]), 1))\n' > cli.py
commit "Add CLI entry point"
git checkout -q -b feature/retry
printf 'def retry(fn, attempts=3):\n    for i in range(attempts):\n        try:\n            return fn()\n        except OSError:\n            if i == attempts - 1:\n                raise\n' > retry.py
commit "retry: add retry helper"
printf '\n\ndef backoff(attempt, base=0.5, cap=30.0):\n    return min(cap, base * 2 ** attempt)\n' >> retry.py
commit "retry: add exponential backoff"
git checkout -q main
sed -i 's/start = number \* size/start = (number - 1) * size/' pager.py
commit "Fix off-by-one in pager"
printf '__version__ = "1.4.1"\n' > version.py
commit "Bump version to 1.4.1"
# the accident
git branch -q -D feature/retry
git reset -q --hard HEAD~2
# ...and then someone "cleaned up" the reflogs, so only dangling objects remain
git reflog expire --expire=now --expire-unreachable=now --all
