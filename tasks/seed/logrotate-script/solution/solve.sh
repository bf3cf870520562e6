#!/bin/bash
# Reference solution: install /app/rotate.sh (copytruncate-style rotation with gzip).
set -euo pipefail
cat > /app/rotate.sh <<'SH'
#!/bin/bash
set -euo pipefail
if [ $# -ne 2 ] || ! [[ $2 =~ ^[0-9]+$ ]] || [ "$2" -lt 1 ]; then
  echo "usage: $0 DIR KEEP (KEEP >= 1)" >&2
  exit 2
fi
dir=$1 keep=$2
shopt -s nullglob
for log in "$dir"/*.log; do
  [ -f "$log" ] && [ ! -L "$log" ] && [ -s "$log" ] || continue
  # drop everything that would end up beyond KEEP
  for old in "$log".*.gz; do
    n=${old#"$log".}; n=${n%.gz}
    if [[ $n =~ ^[0-9]+$ ]] && [ "$n" -ge "$keep" ]; then rm -f -- "$old"; fi
  done
  for ((n = keep - 1; n >= 1; n--)); do
    if [ -e "$log.$n.gz" ]; then mv -- "$log.$n.gz" "$log.$((n + 1)).gz"; fi
  done
  gzip -c -- "$log" > "$log.1.gz"
  : > "$log"   # truncate in place: same inode, same mode
done
SH
chmod +x /app/rotate.sh
/app/rotate.sh /app/demo 3
ls -l /app/demo
