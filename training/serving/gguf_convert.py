"""Hugging Face weights -> GGUF, for the embedded (llama.cpp) policy server.

Uses llama.cpp's own converters (`convert_lora_to_gguf.py`, `convert_hf_to_gguf.py`), which
`embedded_setup` extracts from the llama-cpp-python source distribution. They import torch and
transformers (the `train` extra), so every conversion runs in a subprocess: the graph process never
imports torch. Measured on 2 cores: a PEFT adapter of SmolLM2-135M converts in ~8 s, the full model
to q8_0 in ~11 s. Do not re-quantise a full model to Q4_1: its answers degrade.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field

from ...tools.one_time import record_one_time_build

AdapterOutType = Literal["f32", "f16", "bf16", "q8_0"]
ModelOutType = Literal["f32", "f16", "bf16", "q8_0"]

# Writes a Hugging Face config + tokenizer folder from a GGUF model (transformers reads GGUF
# metadata); the LoRA converter needs the base model's config.json, and there is no hub to ask.
_EXPORT_CONFIG = """
import sys
from pathlib import Path
from transformers import AutoConfig, AutoTokenizer
from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES
gguf = Path(sys.argv[1]); out = Path(sys.argv[2])
config = AutoConfig.from_pretrained(gguf.parent, gguf_file=gguf.name)
if not config.architectures:  # GGUF metadata has none; llama.cpp's converters pick by it
    config.architectures = [MODEL_FOR_CAUSAL_LM_MAPPING_NAMES[config.model_type]]
config.save_pretrained(out)
AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name).save_pretrained(out)
"""


# Writes a plain Hugging Face model folder (dequantised safetensors, config, tokenizer with its
# chat template) from a GGUF model: the weights the trainer starts from. A fresh model built from
# the config takes the state dict, so the saved config carries no `quantization_config: gguf`.
_EXPORT_MODEL = """
import sys
from pathlib import Path
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer
from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES
gguf = Path(sys.argv[1]); out = Path(sys.argv[2])
loaded = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
config = loaded.config
if hasattr(config, "quantization_config"):
    del config.quantization_config
if not config.architectures:
    config.architectures = [MODEL_FOR_CAUSAL_LM_MAPPING_NAMES[config.model_type]]
fresh = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
fresh.load_state_dict(loaded.state_dict())
fresh.save_pretrained(out)
tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
assert tokenizer.chat_template, "the GGUF carries no chat template"
tokenizer.save_pretrained(out)
"""


# Copies a GGUF model with the tokenizer.* metadata of another GGUF (the base model's): the
# tokenizer a GGUF-loaded model saves is transformers' re-creation, which llama.cpp's converter
# misreads (a byte-level BPE vocabulary written as a SentencePiece one), while fine-tuning never
# changes the vocabulary. argv: model, vocab source, output, the converters' gguf-py folder.
_GRAFT_VOCAB = """
import sys
from pathlib import Path
sys.path.insert(0, sys.argv[4])
import gguf
model, vocab, out = (gguf.GGUFReader(sys.argv[1]), gguf.GGUFReader(sys.argv[2]), Path(sys.argv[3]))
arch = model.get_field(gguf.Keys.General.ARCHITECTURE).contents()
writer = gguf.GGUFWriter(out, arch=arch, endianess=model.endianess)
def copy(reader, keep):
    for f in reader.fields.values():
        if f.name == gguf.Keys.General.ARCHITECTURE or f.name.startswith("GGUF.") or not keep(f.name):
            continue
        kind = f.types[0]
        sub = f.types[-1] if kind == gguf.GGUFValueType.ARRAY else None
        writer.add_key_value(f.name, f.contents(), kind, sub_type=sub)
copy(model, lambda name: not name.startswith("tokenizer."))
copy(vocab, lambda name: name.startswith("tokenizer."))
for t in model.tensors:
    writer.add_tensor_info(t.name, t.data.shape, t.data.dtype, t.data.nbytes, t.tensor_type)
writer.write_header_to_file()
writer.write_kv_data_to_file()
writer.write_ti_data_to_file()
for t in model.tensors:
    writer.write_tensor_data(t.data, tensor_endianess=model.endianess)
writer.close()
"""


class GGUFConversionError(RuntimeError):
    """A conversion to GGUF failed; the message carries the converter's own error output."""


class Conversion(BaseModel):
    """The result of one conversion."""

    output: Path = Field(description="The GGUF file written.")
    seconds: float


def _offline_env() -> dict[str, str]:
    env = dict(os.environ)
    env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", HF_HUB_DISABLE_TELEMETRY="1")
    env.pop("NO_LOCAL_GGUF", None)  # the converters must use the gguf-py shipped beside them
    return env


def _run(cmd: list[str], what: str, timeout_sec: float) -> None:
    try:
        done = subprocess.run(
            cmd,
            check=False,
            capture_output=True,
            text=True,
            timeout=timeout_sec,
            env=_offline_env(),
            stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired as exc:
        raise GGUFConversionError(f"{what} did not finish within {timeout_sec:.0f}s") from exc
    if done.returncode != 0:
        tail = (done.stderr or done.stdout)[-3000:]
        hint = ""
        if "No module named" in tail:
            hint = (
                "\nThe converters need torch, transformers and safetensors: install the "
                "`train` extra into the interpreter that runs them."
            )
        raise GGUFConversionError(f"{what} failed (exit {done.returncode}):\n{tail}{hint}")


def _converter(converter_dir: Path, script: str) -> Path:
    path = converter_dir / script
    if not path.is_file():
        raise GGUFConversionError(
            f"{path} is missing; run the embedded set-up first "
            "(python -m autoenvscaling.training.serving.embedded_setup)"
        )
    return path


def _publish(partial: Path, out_file: Path) -> None:
    if not partial.is_file():
        raise GGUFConversionError(f"the converter exited 0 but wrote no {partial}")
    os.replace(partial, out_file)  # atomic: a half-written GGUF is never found under its name


@contextmanager
def _without_gguf_quant_config(model_dir: Path) -> Iterator[Path]:
    """`model_dir`, or a linked copy whose config.json drops `quantization_config: {gguf}`.

    A model trained from a GGUF-loaded base keeps that entry although its saved weights are plain
    (dequantised) tensors; llama.cpp's converter then refuses it. The checkpoint folder itself is
    the registry's and is not touched.
    """
    config = json.loads((model_dir / "config.json").read_text(encoding="utf-8"))
    if (config.get("quantization_config") or {}).get("quant_method") != "gguf":
        yield model_dir
        return
    del config["quantization_config"]
    with tempfile.TemporaryDirectory(prefix="gguf-src-") as tmp:
        for item in model_dir.iterdir():
            if item.name != "config.json":
                (Path(tmp) / item.name).symlink_to(item.resolve())
        (Path(tmp) / "config.json").write_text(json.dumps(config, indent=2), encoding="utf-8")
        yield Path(tmp)


def export_base_config(
    gguf_model: Path, out_dir: Path, *, python: str | None = None, timeout_sec: float = 600.0
) -> Path:
    """Write `config.json` (+ tokenizer files) for a GGUF model into `out_dir`; idempotent."""
    if (out_dir / "config.json").is_file():
        return out_dir
    partial = out_dir.with_name(f".{out_dir.name}.partial-{os.getpid()}")
    _run(
        [python or sys.executable, "-c", _EXPORT_CONFIG, str(gguf_model), str(partial)],
        f"exporting the Hugging Face config of {gguf_model.name}",
        timeout_sec,
    )
    if out_dir.exists():  # another process won the race; theirs is as good as ours
        return out_dir
    os.replace(partial, out_dir)
    return out_dir


def export_hf_model(
    gguf_model: Path, out_dir: Path, *, python: str | None = None, timeout_sec: float = 900.0
) -> Path:
    """A trainable Hugging Face folder of a GGUF model in `out_dir` (idempotent, atomic)."""
    if (out_dir / "config.json").is_file() and any(out_dir.glob("*.safetensors")):
        return out_dir
    partial = out_dir.with_name(f".{out_dir.name}.partial-{os.getpid()}")
    _run(
        [python or sys.executable, "-c", _EXPORT_MODEL, str(gguf_model), str(partial)],
        f"exporting Hugging Face weights of {gguf_model.name}",
        timeout_sec,
    )
    if out_dir.exists():
        return out_dir
    os.replace(partial, out_dir)
    record_one_time_build(f"the Hugging Face weights of {gguf_model.name} ({out_dir})")
    return out_dir


def convert_lora_adapter(
    adapter_dir: Path,
    out_file: Path,
    *,
    base_config_dir: Path,
    converter_dir: Path,
    outtype: AdapterOutType = "f16",
    python: str | None = None,
    timeout_sec: float = 600.0,
) -> Conversion:
    """PEFT LoRA folder (adapter_config.json + adapter_model.safetensors) -> GGUF adapter file.

    `base_config_dir` holds the base model's config.json (see `export_base_config`).
    """
    if not (adapter_dir / "adapter_config.json").is_file():
        raise GGUFConversionError(
            f"{adapter_dir} is not a PEFT adapter folder (no adapter_config.json)"
        )
    start = time.monotonic()
    out_file.parent.mkdir(parents=True, exist_ok=True)
    partial = out_file.with_name(f".{out_file.name}.partial-{os.getpid()}")
    _run(
        [
            python or sys.executable,
            str(_converter(converter_dir, "convert_lora_to_gguf.py")),
            "--outfile",
            str(partial),
            "--outtype",
            outtype,
            "--base",
            str(base_config_dir),
            str(adapter_dir),
        ],
        f"converting the LoRA adapter {adapter_dir}",
        timeout_sec,
    )
    _publish(partial, out_file)
    return Conversion(output=out_file, seconds=time.monotonic() - start)


def convert_full_model(
    model_dir: Path,
    out_file: Path,
    *,
    converter_dir: Path,
    outtype: ModelOutType = "q8_0",
    vocab_from: Path | None = None,
    python: str | None = None,
    timeout_sec: float = 1800.0,
) -> Conversion:
    """A Hugging Face model folder (config, tokenizer, safetensors) -> GGUF model file.

    `vocab_from`: a GGUF whose tokenizer metadata replaces the converted one — pass the base GGUF
    when the model was trained from a GGUF-loaded base (its saved tokenizer is not the original).
    """
    if not (model_dir / "config.json").is_file():
        raise GGUFConversionError(
            f"{model_dir} is not a Hugging Face model folder (no config.json)"
        )
    start = time.monotonic()
    out_file.parent.mkdir(parents=True, exist_ok=True)
    partial = out_file.with_name(f".{out_file.name}.partial-{os.getpid()}")
    with _without_gguf_quant_config(model_dir) as source:
        _run(
            [
                python or sys.executable,
                str(_converter(converter_dir, "convert_hf_to_gguf.py")),
                "--outfile",
                str(partial),
                "--outtype",
                outtype,
                str(source),
            ],
            f"converting the model {model_dir}",
            timeout_sec,
        )
    if vocab_from is not None:
        grafted = partial.with_name(partial.name + ".vocab")
        try:
            _run(
                [
                    python or sys.executable,
                    "-c",
                    _GRAFT_VOCAB,
                    str(partial),
                    str(vocab_from),
                    str(grafted),
                    str(converter_dir / "gguf-py"),
                ],
                f"copying the tokenizer of {vocab_from.name}",
                timeout_sec,
            )
        finally:
            partial.unlink(missing_ok=True)
        partial = grafted
    _publish(partial, out_file)
    return Conversion(output=out_file, seconds=time.monotonic() - start)
