#!/bin/bash
# Reference solution: list unreachable commits, pick the lost tips by subject, restore refs.
set -euo pipefail
cd /app/repo
by_subject() {
  git fsck --unreachable --no-reflogs 2>/dev/null | awk '$2 == "commit" {print $3}' |
    while read -r c; do
      if [ "$(git log -1 --format=%s "$c")" = "$1" ]; then echo "$c"; fi
    done
}
lost_main=$(by_subject "Bump version to 1.4.1")
lost_retry=$(by_subject "retry: add exponential backoff")
echo "main tip: $lost_main  feature/retry tip: $lost_retry"
git branch feature/retry "$lost_retry"
git checkout -q main
git reset -q --hard "$lost_main"
git status --short
git log --oneline --graph --all
