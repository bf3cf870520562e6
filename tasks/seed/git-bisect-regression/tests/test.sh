#!/bin/bash
# Verifier (binary): rebuild the repository, find the first bad commit by running calc.py at
# every commit, compare with /app/first_bad.txt; check the repo was left as found.
set -u
mkdir -p /logs/verifier
echo 0.0 > /logs/verifier/reward.txt
ref=$(mktemp -d)/calc
python3 /tests/make_repo.py "$ref"
want=""
for c in $(git -C "$ref" rev-list --reverse main); do
  git -C "$ref" checkout -q "$c"
  out=$(cd "$ref" && python3 calc.py '2^3^2' 2>/dev/null) || continue  # does not run: no information
  if [ "$out" != "512" ]; then want=$c; break; fi
done
want_main=$(git -C "$ref" rev-parse main)
echo "expected first bad commit: $want"
pass=1
got=$(cat /app/first_bad.txt 2>/dev/null)
if [ -n "$want" ] && [ "$got" = "$want" ]; then echo "PASS: /app/first_bad.txt = $got"; else echo "FAIL: /app/first_bad.txt = '$got'"; pass=0; fi
G="git -c safe.directory=/app/calc -C /app/calc"
[ "$($G rev-parse -q --verify refs/heads/main)" = "$want_main" ] && echo "PASS: main unchanged" || { echo "FAIL: main moved"; pass=0; }
[ "$($G symbolic-ref -q HEAD)" = "refs/heads/main" ] && echo "PASS: main checked out" || { echo "FAIL: HEAD is not main"; pass=0; }
[ ! -e /app/calc/.git/BISECT_START ] && echo "PASS: no bisect in progress" || { echo "FAIL: bisect still in progress"; pass=0; }
[ "$pass" = 1 ] && echo 1.0 > /logs/verifier/reward.txt
cat /logs/verifier/reward.txt
