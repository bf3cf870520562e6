"""PEFT checkpoint -> GGUF -> hot-loaded into the embedded server, as `activate()` does after training.

The LoRA is made with peft on SmolLM2-135M-Instruct loaded from the same GGUF the server serves
(transformers dequantises it on CPU). Needs the `embedded` and `train` extras; the converters come
from the set-up cache (the llama-cpp-python source distribution, fetched once with pip).
"""

from __future__ import annotations

import importlib.util
import json
import sys

import httpx
import pytest

from autoenvscaling.training.serving.embedded_setup import (
    embedded_cache_dir,
    ensure_embedded_assets,
    llama_cpp_available,
)

_missing = [
    m for m in ("torch", "transformers", "peft", "gguf") if importlib.util.find_spec(m) is None
]
if not llama_cpp_available() or _missing:
    _why = (
        "llama-cpp-python[server] is not installed (the `embedded` extra)"
        if not llama_cpp_available()
        else f"{', '.join(_missing)} not installed (the `train` and `embedded` extras)"
    )
    print(f"SKIP embedded conversion tests: {_why}", file=sys.stderr)
    pytest.skip(_why, allow_module_level=True)

from autoenvscaling.training.policy import Checkpoint, PolicySwapError
from autoenvscaling.training.serving.embedded_server import EmbeddedLlamaServer
from autoenvscaling.training.serving.gguf_convert import GGUFConversionError, export_base_config

pytestmark = [pytest.mark.slow, pytest.mark.train]

PROMPT = "Name three colours."


@pytest.fixture(scope="module")
def assets():
    return ensure_embedded_assets(with_converter=True)


@pytest.fixture(scope="module")
def hf_model(assets):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = assets.model_path
    return (
        AutoModelForCausalLM.from_pretrained(path.parent, gguf_file=path.name),
        AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name),
    )


@pytest.fixture
async def server(assets, tmp_path):
    async with EmbeddedLlamaServer(
        model_path=assets.model_path,
        n_ctx=2048,
        converter_dir=assets.converter_dir,
        work_dir=tmp_path / "server",
    ) as srv:
        yield srv


def _first_words(text: str, n: int) -> list[str]:
    return text.split()[:n]


async def _complete(base_url: str, model: str, prompt: str) -> str:
    async with httpx.AsyncClient(timeout=120) as client:
        response = await client.post(
            f"{base_url}/completions",
            json={"model": model, "prompt": prompt, "temperature": 0, "max_tokens": 12},
        )
    assert response.status_code == 200, response.text
    return response.json()["choices"][0]["text"]


async def test_peft_lora_checkpoint_is_converted_and_served(server, hf_model, assets, tmp_path):
    import torch
    from peft import LoraConfig, get_peft_model

    model, tokenizer = hf_model
    torch.manual_seed(0)
    # init_lora_weights=False: random A and B (PEFT's default zero B would be a no-op and prove
    # nothing); B scaled down so the adapted model still writes sentences.
    peft_model = get_peft_model(
        model,
        LoraConfig(
            r=8,
            lora_alpha=16,
            target_modules=["q_proj", "v_proj", "o_proj", "up_proj"],
            init_lora_weights=False,
        ),
    )
    with torch.no_grad():
        for name, param in peft_model.named_parameters():
            if "lora_B" in name:
                param.mul_(0.3)
    adapter_dir = tmp_path / "ckpt-1" / "weights"
    peft_model.save_pretrained(adapter_dir)

    messages = [{"role": "user", "content": PROMPT}]
    prompt = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    inputs = tokenizer(prompt, return_tensors="pt")

    def hf_answer() -> str:
        out = peft_model.generate(**inputs, max_new_tokens=12, do_sample=False)
        return tokenizer.decode(out[0, inputs["input_ids"].shape[1] :], skip_special_tokens=True)

    hf_lora = hf_answer()
    with peft_model.disable_adapter():
        hf_base = hf_answer()
    peft_model.unload()  # give the shared module fixture its plain layers back
    assert _first_words(hf_lora, 2) != _first_words(hf_base, 2), "the adapter changes nothing"

    checkpoint = Checkpoint(
        id="ckpt-1", path=adapter_dir, base_model=str(assets.model_path), kind="lora"
    )
    ref = await server.activate(checkpoint)
    assert ref.model == "ckpt-1" and ref.checkpoint_id == "ckpt-1"
    assert ref.served_from == "llama.cpp:lora" and ref.base_url == server.base_url
    assert server.current() == ref
    assert (server.log_path.parent / "converted" / "ckpt-1.lora.gguf").read_bytes()[:4] == b"GGUF"
    # the base model's HF config, exported from the GGUF for the converter, is cached for reuse
    hf_config = embedded_cache_dir() / "models" / f"{assets.model_path.stem}-hf"
    assert export_base_config(assets.model_path, hf_config) == hf_config  # no subprocess now
    assert json.loads((hf_config / "config.json").read_text())["architectures"]
    # Greedy decoding in llama.cpp (Q4_1 base + GGUF adapter) follows the PEFT model in torch
    # (the same dequantised base + adapter) for the first words; later ones may drift with
    # llama.cpp's quantised arithmetic.
    assert _first_words(await _complete(server.base_url, "policy", prompt), 3) == _first_words(
        hf_base, 3
    )
    assert _first_words(await _complete(server.base_url, ref.model, prompt), 2) == _first_words(
        hf_lora, 2
    )
    # activating the same checkpoint again (a retried swap) keeps it served
    assert (await server.activate(checkpoint)).model == "ckpt-1"


async def test_a_broken_checkpoint_keeps_the_previous_policy(server, tmp_path):
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "adapter_config.json").write_text("{}")
    checkpoint = Checkpoint(id="broken", path=broken, base_model="unused", kind="lora")
    before = server.current()
    with pytest.raises(PolicySwapError, match="still serving 'policy'") as info:
        await server.activate(checkpoint)
    assert isinstance(info.value.__cause__, GGUFConversionError)
    assert server.current() == before
    assert "broken" not in await server.served_models()


async def test_full_checkpoint_is_converted_and_served(server, hf_model, tmp_path):
    from transformers import AutoModelForCausalLM

    model, tokenizer = hf_model
    # A GGUF-loaded model does not save as is: copy its weights into a fresh model first.
    fresh = AutoModelForCausalLM.from_config(model.config)
    fresh.load_state_dict(model.state_dict())
    weights = tmp_path / "ckpt-full" / "weights"
    fresh.save_pretrained(weights)
    tokenizer.save_pretrained(weights)

    checkpoint = Checkpoint(
        id="ckpt-full", path=weights, base_model="SmolLM2-135M-Instruct", kind="full"
    )
    ref = await server.activate(checkpoint)
    assert ref.model == "ckpt-full" and ref.served_from == "llama.cpp:full"
    assert (server.log_path.parent / "converted" / "ckpt-full.q8_0.gguf").is_file()
    prompt = tokenizer.apply_chat_template(
        [{"role": "user", "content": PROMPT}], add_generation_prompt=True, tokenize=False
    )
    # q8_0 of the same weights: the same greedy start as the Q4_1 base it came from
    assert _first_words(await _complete(server.base_url, ref.model, prompt), 2) == _first_words(
        await _complete(server.base_url, "policy", prompt), 2
    )
