#!/bin/bash
# Reference solution: rewrite the parser's memory handling (getline instead of a fixed buffer,
# heap-allocated section/key/value copies, a growing entry array, exact key matching, a trim that
# cannot run off the start of an empty string, _POSIX_C_SOURCE so strdup/getline are declared
# under -std=c11), then build with the verifier's flags and try the example.
set -euo pipefail
cd /app/kvtool
patch -p1 < /solution/fix.patch
gcc -std=c11 -O2 -Wall -D_FORTIFY_SOURCE=2 -fstack-protector-strong -o kvget src/*.c
MALLOC_CHECK_=3 ./kvget example.ini
./kvget example.ini server.port
