"""Learning measured by behaviour (training/grpo/behaviour.py) on a real GRPO step.

SmolLM2-135M-Instruct (the embedded default's weights, exported once from its GGUF) takes one
TRL GRPOTrainer step, LoRA as the worker trains, with the worker's measurement hooks; the reward
is a plain function of the text (the share of vowels among its letters: continuous, so every group
of 4 has variance). The step must make the completions it rewarded more likely and those it
penalised less likely, on the same tokens, and move the policy on the probe set (KL > 0). Seed,
learning rate and batch are fixed, so the numbers are the same on every run of this machine's
torch; the asserts are on the direction, not on a threshold.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from autoenvscaling.training.backend import Behaviour

pytestmark = [
    pytest.mark.train,
    pytest.mark.skipif(
        any(importlib.util.find_spec(m) is None for m in ("torch", "trl", "gguf")),
        reason="needs the train extra (torch, trl) and the embedded extra (gguf)",
    ),
]

PROMPTS = ["Name a fruit and say why you like it.", "Describe the sea in one sentence."]


@pytest.fixture(scope="module")
def smollm2() -> Path:
    from autoenvscaling.training.serving.embedded_setup import (
        ensure_embedded_assets,
        ensure_hf_base_model,
    )

    return ensure_hf_base_model(ensure_embedded_assets(with_converter=False))


def vowel_share(completions, **_) -> list[float]:
    texts = [c[-1]["content"] if isinstance(c, list) else c for c in completions]
    letters = [[ch for ch in t.lower() if ch.isalpha()] for t in texts]
    return [sum(ch in "aeiou" for ch in ls) / max(len(ls), 1) for ls in letters]


def grpo_step(model_dir: Path, out: Path, *, learning_rate: float, seed: int = 0) -> Behaviour:
    """One measured GRPO step: 2 prompts x 4 completions, LoRA r=8 on every linear layer."""
    import torch
    from datasets import Dataset
    from peft import LoraConfig
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOConfig, GRPOTrainer

    from autoenvscaling.training.grpo.behaviour import BehaviourRecorder, measured

    torch.manual_seed(seed)
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    tokenizer.padding_side = "left"
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    config = GRPOConfig(
        output_dir=str(out),
        max_steps=1,
        learning_rate=learning_rate,
        per_device_train_batch_size=4,
        gradient_accumulation_steps=2,  # one step = 2 groups, two passes (as the worker splits)
        num_generations=4,
        max_completion_length=24,
        temperature=1.0,
        beta=0.0,
        seed=seed,
        use_cpu=True,
        bf16=False,
        logging_steps=1,
        report_to="none",
        save_strategy="no",
        shuffle_dataset=False,
        disable_tqdm=True,
    )
    recorder = BehaviourRecorder(temperature=1.0)
    trainer = measured(GRPOTrainer)(
        behaviour=recorder,
        model=model,
        reward_funcs=[vowel_share],
        args=config,
        train_dataset=Dataset.from_list(
            [{"prompt": [{"role": "user", "content": p}]} for p in PROMPTS]
        ),
        processing_class=tokenizer,
        peft_config=LoraConfig(
            r=8, lora_alpha=16, lora_dropout=0.0, target_modules="all-linear", task_type="CAUSAL_LM"
        ),
    )
    recorder.start_probe(trainer.model, tokenizer, None)
    trainer.train()
    recorder.end_probe(trainer.model_wrapped)
    return recorder.report()


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_a_grpo_step_makes_rewarded_completions_likelier_and_penalised_ones_less(smollm2, tmp_path):
    import torch

    torch.set_num_threads(2)
    behaviour = grpo_step(smollm2, tmp_path / "out", learning_rate=1e-3)
    print(json.dumps(behaviour.model_dump(), indent=1))  # the measured numbers, for the record
    (step,) = behaviour.steps
    assert step.step == 1
    rewarded, penalised = step.rewarded, step.penalised
    assert rewarded is not None and penalised is not None, behaviour
    # Every completion of a group with variance has a sign; 8 completions, 2 groups.
    assert rewarded.completions + penalised.completions == 8
    assert rewarded.tokens > 0 and penalised.tokens > 0
    # The direction: what the step rewarded became more likely, what it penalised less likely.
    assert rewarded.after > rewarded.before, behaviour.line()
    assert penalised.after < penalised.before, behaviour.line()
    # The job's totals are its one step's; the policy moved on the fixed probe set.
    assert behaviour.rewarded == rewarded and behaviour.penalised == penalised
    assert behaviour.probe_kl is not None and behaviour.probe_kl > 0
    assert behaviour.probe_tokens > 0
    assert (
        "rewarded logp" in behaviour.line() and "KL to the previous checkpoint" in behaviour.line()
    )
    assert behaviour.summary()["rewarded_logp_after"] == rewarded.after
