#!/bin/bash
# Reference solution: install /app/run_jobs.sh. Each job runs under GNU timeout, which puts the
# job in its own process group and signals the whole group on expiry (so background children
# die too); `wait -n -p` lets us refill a free slot as soon as any job ends.
set -euo pipefail
cat > /app/run_jobs.sh <<'SH'
#!/bin/bash
set -u
if [ $# -ne 2 ]; then
  echo "usage: $0 JOBFILE OUTDIR" >&2
  exit 2
fi
jobfile=$1 out=$2
max_parallel=3
mkdir -p "$out"

ids=() timeouts=() cmds=()
while IFS= read -r line || [ -n "$line" ]; do
  trimmed=${line#"${line%%[![:space:]]*}"}
  [ -z "$trimmed" ] && continue
  [ "${trimmed:0:1}" = "#" ] && continue
  read -r id to cmd <<< "$trimmed"
  ids+=("$id") timeouts+=("$to") cmds+=("$cmd")
done < "$jobfile"

declare -A slot_of   # pid -> job index
codes=()
next=0 running=0 total=${#ids[@]}
while (( next < total || running > 0 )); do
  while (( running < max_parallel && next < total )); do
    timeout -k 5 "${timeouts[next]}" bash -c "${cmds[next]}" > "$out/${ids[next]}.log" 2>&1 < /dev/null &
    slot_of[$!]=$next
    next=$((next + 1)) running=$((running + 1))
  done
  finished=""
  wait -n -p finished
  rc=$?
  [ -z "$finished" ] && continue
  codes[${slot_of[$finished]}]=$rc
  unset "slot_of[$finished]"
  running=$((running - 1))
done

all_ok=1
: > "$out/results.tsv"
for i in "${!ids[@]}"; do
  rc=${codes[i]}
  case $rc in
    0) status=ok ;;
    124) status=timeout ;;
    *) status=failed ;;
  esac
  [ "$rc" -ne 0 ] && all_ok=0
  printf '%s\t%s\t%s\n' "${ids[i]}" "$rc" "$status" >> "$out/results.tsv"
done
(( all_ok )) && exit 0 || exit 1
SH
chmod +x /app/run_jobs.sh
/app/run_jobs.sh /app/jobs.example /tmp/example-out || true
cat /tmp/example-out/results.tsv
