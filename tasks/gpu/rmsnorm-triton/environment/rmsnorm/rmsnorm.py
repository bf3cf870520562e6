"""RMSNorm over the last dimension of a CUDA tensor (see the task instruction)."""
import torch


def rmsnorm(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    rms = torch.sqrt(x.pow(2).mean(0, keepdim=True)) + eps
    return x / rms * weight
