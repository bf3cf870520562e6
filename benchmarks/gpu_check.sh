#!/usr/bin/env bash
# One prepared run over the project's GPU paths, on a machine with an NVIDIA GPU and python3 with
# torch + transformers + accelerate (no hub, no container engine needed). Python packages it lacks
# come as wheels in .whl/ (trl, datasets, peft, pydantic; `--no-deps`), installed to /tmp/site.
#
#   GPU_INPUTS=.gpu OUT=out bash benchmarks/gpu_check.sh
#
# .gpu/ holds what this machine made for it: model/ (the embedded base model's config and
# tokenizer, no weights) and cold-start/ (a cold start's card.json and cold-start-train.jsonl).
# Writes OUT/: gpu.txt (the card), sft.json (the cold start's SFT job on CUDA), grpo.json
# (benchmarks/gpu_train.py), gpu_tasks.json (tasks/gpu/*: oracle and nop, benchmarks/gpu_tasks.py),
# mem.csv (GPU memory used, every 0.5 s), log.txt.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/gpu-check}
IN=${GPU_INPUTS:-.gpu}
mkdir -p "$OUT"
exec > >(tee "$OUT/log.txt") 2>&1
export HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false PYTHONUNBUFFERED=1 TRL_EXPERIMENTAL_SILENCE=1

if compgen -G ".whl/*.whl" >/dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl || exit 1
  export PYTHONPATH=/tmp/site:$PWD
else
  export PYTHONPATH=$PWD
fi
# datasets 5 wants pyarrow >= 24; an older pyarrow gets datasets 4.8 (pyarrow >= 21).
if ! python3 -c "import datasets" 2>/dev/null && compgen -G ".whl/fallback/*.whl" >/dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/fallback/*.whl
fi
python3 - <<'EOF' | tee "$OUT/gpu.txt"
import importlib, torch
print("device:", torch.cuda.get_device_name(0), "| torch", torch.__version__, "| cuda", torch.version.cuda)
for name in ("transformers", "trl", "peft", "accelerate", "datasets", "pyarrow", "pydantic"):
    try:
        print(name, importlib.import_module(name).__version__)
    except Exception as exc:  # the run goes on: each step below says what it lacks
        print(name, "MISSING", type(exc).__name__, exc)
EOF
nvidia-smi --query-gpu=timestamp,memory.used --format=csv,noheader -lms 500 >"$OUT/mem.csv" &
SMI=$!

step() {  # name, limit in seconds, command...
  local name=$1 limit=$2; shift 2
  local started=$SECONDS
  timeout "$limit" "$@"; local rc=$?
  echo "== $name: rc $rc, $((SECONDS - started)) s"
}

step "GPU tasks: oracle and nop (gpu_tasks.py)" 150 python3 benchmarks/gpu_tasks.py --out "$OUT/gpu_tasks.json"
step "cold-start SFT on CUDA" 240 \
  python3 benchmarks/gpu_sft.py --model-files "$IN/model" --cache "$IN/cold-start" --out "$OUT/sft.json"
step "GRPO steps (gpu_train.py)" 200 python3 benchmarks/gpu_train.py --steps 2 --out "$OUT/grpo.json"
kill "$SMI" 2>/dev/null
echo "peak GPU memory used: $(cut -d, -f2 "$OUT/mem.csv" | sort -n | tail -1)"
