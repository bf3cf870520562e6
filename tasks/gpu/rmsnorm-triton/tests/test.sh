#!/bin/bash
# Verifier (binary): the agent's RMSNorm kernel must match the float32 reference and run at least
# 2x faster than PyTorch eager on the GPU (tests/check_rmsnorm.py). Paths default to the task's
# container and can be moved for a run without a container (benchmarks/gpu_tasks.py):
# APP_DIR (/app), TESTS_DIR (/tests), LOGS_DIR (/logs/verifier).
set -u
APP_DIR=${APP_DIR:-/app} TESTS_DIR=${TESTS_DIR:-/tests} LOGS_DIR=${LOGS_DIR:-/logs/verifier}
export APP_DIR
mkdir -p "$LOGS_DIR"
[ "$LOGS_DIR" = /logs/verifier ] && chmod 755 /logs
chmod 755 "$LOGS_DIR"
rm -f "$LOGS_DIR/reward.json"
echo 0.0 > "$LOGS_DIR/reward.txt"
python3 -I "$TESTS_DIR/check_rmsnorm.py" && echo 1.0 > "$LOGS_DIR/reward.txt"
rm -f "$LOGS_DIR/reward.json"
cat "$LOGS_DIR/reward.txt"
