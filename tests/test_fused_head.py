"""The GRPO worker's memory settings change how it computes, never what it learns.

- training/trl_adapter.py: TRL's fused LM head on CPU scores only the labelled (completion)
  positions, as it does on CUDA: the same log-probabilities, entropies and gradients as TRL's
  own CPU path, over fewer rows (a spy counts them, so a TRL that moves its decision point fails
  here instead of silently measuring the old path).
- TrainHyperParams.passes: the step's rollouts split evenly into passes of at most
  micro_batch_size (TRL needs equal passes; gradients accumulate into one optimizer step).
"""

from __future__ import annotations

import importlib.util

import pytest

from autoenvscaling.training.backend import TrainHyperParams

needs_trl = pytest.mark.skipif(
    importlib.util.find_spec("torch") is None or importlib.util.find_spec("trl") is None,
    reason="the train extra is not installed (pip install -e '.[train]'): torch/trl missing",
)


@pytest.mark.parametrize(
    ("micro", "rollouts", "expected"),
    [(None, 4, (4, 1)), (1, 4, (1, 4)), (2, 8, (2, 4)), (3, 4, (2, 2)), (16, 4, (4, 1))],
)
def test_passes_split_the_step_evenly(micro, rollouts, expected) -> None:
    assert TrainHyperParams(micro_batch_size=micro).passes(rollouts) == expected


def test_one_rollout_a_pass_is_the_default() -> None:
    # the embedded round's 4 rollouts: 4 passes of one sequence, one optimizer step
    assert TrainHyperParams().passes(4) == (1, 4)


@needs_trl
@pytest.mark.timeout(300)  # importing torch + trl is most of it (~70 s on busy cores)
def test_completion_only_head_scores_the_same_with_fewer_rows(monkeypatch) -> None:
    import torch
    import trl.trainer.utils as trl_utils
    from transformers import LlamaConfig, LlamaForCausalLM

    from autoenvscaling.training.trl_adapter import score_labelled_positions_only

    monkeypatch.setattr(trl_utils, "_use_triton", trl_utils._use_triton)  # restored afterwards
    rows: list[int] = []
    chunked = trl_utils._ChunkedLogProbFunction

    class Spy(chunked):  # type: ignore[misc, valid-type]
        @staticmethod
        def forward(ctx, hidden, *args):
            rows.append(hidden.shape[0])
            return chunked.forward(ctx, hidden, *args)

    monkeypatch.setattr(trl_utils, "_ChunkedLogProbFunction", Spy)

    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=300,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
    )
    model = LlamaForCausalLM(config)
    trl_utils.add_fused_lm_head(model, outputs=("log_probs", "entropy"))
    ids = torch.randint(0, 300, (3, 20))
    mask = torch.ones_like(ids)
    mask[0, :5] = 0  # left padding, as the trainer's batches have
    labels = ids.masked_fill(mask == 0, -100)
    labels[:, :12] = -100  # the prompt: only the last 8 tokens are the completion

    def score():
        model.zero_grad(set_to_none=True)
        out = model(input_ids=ids, attention_mask=mask, labels=labels, fused_lm_head=True)
        (out.log_probs.sum() - 0.1 * out.entropy.sum()).backward()
        grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
        return out.log_probs.detach(), out.entropy.detach(), grads

    trl_logps, trl_entropy, trl_grads = score()
    assert score_labelled_positions_only()
    assert score_labelled_positions_only()  # idempotent
    logps, entropy, grads = score()

    assert rows == [3 * 19, 3 * 8]  # every position, then only the completion's
    assert torch.allclose(logps, trl_logps, atol=1e-5)
    assert torch.allclose(entropy, trl_entropy, atol=1e-5)
    assert (logps[:, :11] == 0).all() and (logps[:, 11:] != 0).all()
    assert grads.keys() == trl_grads.keys() and grads
    for name, grad in grads.items():
        assert torch.allclose(grad, trl_grads[name], atol=1e-5), name


@needs_trl
def test_the_switch_keeps_trl_s_own_path(monkeypatch) -> None:
    import trl.trainer.utils as trl_utils

    from autoenvscaling.training.trl_adapter import score_labelled_positions_only

    monkeypatch.setattr(trl_utils, "_use_triton", trl_utils._use_triton)
    before = trl_utils._use_triton
    monkeypatch.setenv("AUTOENVSCALING_COMPACT_LM_HEAD", "0")
    assert not score_labelled_positions_only()
    assert trl_utils._use_triton is before
