#!/bin/bash
# Reference solution: select with find (NUL-separated, so odd names are safe), move with
# mv (keeps mtime), build the manifest from the archived copies, prune empty dirs.
set -euo pipefail
cd /app/data
mkdir -p /app/archive
# ! -newermt: mtime <= cut-off; exclude the cut-off second itself to get "strictly before"
find . -type f -size +102399c ! -newermt '2023-12-31 23:59:59 UTC' -print0 |
  while IFS= read -r -d '' f; do
    rel=${f#./}
    mkdir -p "/app/archive/$(dirname -- "$rel")"
    mv -- "$f" "/app/archive/$rel"
    printf '%s\0' "$rel"
  done > /tmp/moved.list
find . -mindepth 1 -type d -empty -delete
cd /app/archive
LC_ALL=C sort -z /tmp/moved.list | while IFS= read -r -d '' rel; do
  printf '%s\t%s\t%s\t%s\n' "$rel" "$(stat -c %s -- "$rel")" \
    "$(TZ=UTC date -d "@$(stat -c %Y -- "$rel")" +%Y-%m-%dT%H:%M:%SZ)" \
    "$(sha256sum < "$rel" | cut -d' ' -f1)"
done > MANIFEST.tsv
wc -l MANIFEST.tsv
