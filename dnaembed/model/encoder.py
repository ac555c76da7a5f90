"""The encoder: a CNN mapping a read to a vector whose squared distances approximate edit distances.

The reference configuration is the paper's CNN-ED-5 (Guo, Liang & Hou, ICML 2022):
five blocks of Conv1d(k=3, 64 channels) -> AvgPool(2) -> ReLU, then
Linear(4D) -> ReLU -> Linear(D) -> BatchNorm(D), outputs scaled by 1/sqrt(2).
Every part is a field of :class:`EncoderConfig`, so other designs are configs,
not code (model files: :mod:`dnaembed.model.checkpoint`).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field

import numpy as np
import torch
from torch import nn

from dnaembed.encoding import COMPLEMENT_CODE, PAD_CODE
from dnaembed.errors import DnaembedError


@dataclass
class EncoderConfig:
    """Architecture of the encoder (plain data; saved in every checkpoint)."""

    window: int = 160
    channels: list[int] = field(default_factory=lambda: [64, 64, 64, 64, 64])
    kernel_size: int = 3
    convs_per_block: int = 1
    dilations: list[int] | None = None
    pool: str = "avg"
    embedding_dim: int = 80
    hidden_factor: int = 4
    scale: float = 1.0 / math.sqrt(2.0)
    name: str = "cnn-ed-5"
    # 2: a second branch reads each read from its 3' end, and the embedding is both
    # branches' outputs side by side (embedding_dim / (2 x views) each). Its errors are little
    # correlated with the 5' branch's, which an indel early in a read shifts (docs/model.md).
    ends: int = 1
    # 2: each read is also embedded through its complement (A<->T, C<->G: the edit
    # distance of two reads is that of their complements), with the same weights; the
    # two embeddings side by side, scaled by 1/sqrt(2), make the squared distance the
    # mean of the two estimates, whose errors are only partly shared (docs/model.md).
    views: int = 1

    def __post_init__(self) -> None:
        if self.window < 2 ** len(self.channels):
            raise DnaembedError(
                f"window {self.window} is too short for {len(self.channels)} pooling blocks"
            )
        if self.dilations is not None and len(self.dilations) != len(self.channels):
            raise DnaembedError("dilations must have one entry per block")
        if self.pool not in ("avg", "max"):
            raise DnaembedError(f"pool must be 'avg' or 'max', got {self.pool!r}")
        if self.convs_per_block < 1:
            raise DnaembedError(f"convs_per_block must be >= 1, got {self.convs_per_block}")
        if type(self.ends) is not int or self.ends not in (1, 2) or self.embedding_dim % self.ends:
            raise DnaembedError(
                f"ends must be 1 or 2 and divide embedding_dim, got ends={self.ends!r} "
                f"with embedding_dim={self.embedding_dim}"
            )
        if (type(self.views) is not int or self.views not in (1, 2)
                or self.embedding_dim % (self.ends * self.views)):
            raise DnaembedError(
                f"views must be 1 or 2 and ends * views must divide embedding_dim, got "
                f"views={self.views!r} with ends={self.ends} and embedding_dim={self.embedding_dim}"
            )
        if self.kernel_size % 2 != 1:
            raise DnaembedError(f"kernel size must be odd, got {self.kernel_size}")

    def to_dict(self) -> dict:
        """The settings as a plain dict (as a checkpoint stores them)."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> EncoderConfig:
        """The config of :meth:`to_dict`'s ``data``; an unknown setting is an error."""
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = set(data) - known
        if unknown:
            raise DnaembedError(f"unknown encoder settings: {', '.join(sorted(unknown))}")
        return cls(**data)


#: Named configurations (docs/benchmarks.md, "Encoder configurations", measures them).
ARCHITECTURES: dict[str, EncoderConfig] = {
    "cnn-ed-5": EncoderConfig(),
}


def one_hot_table() -> torch.Tensor:
    """Rows: A, C, G, T, N, pad -> 5 input channels (ACGT + pad); N is 1/4 on each base."""
    table = torch.zeros(6, 5)
    table[:4, :4] = torch.eye(4)
    table[4, :4] = 0.25
    table[PAD_CODE, 4] = 1.0
    return table


class _PairMax(torch.autograd.Function):
    """Max over pairs of positions, with a backward of a few elementwise ops.

    ``torch.maximum``'s own backward (ties split, masked fills on strided views)
    made a training step of a max-pooled encoder about twice as slow as an averaging
    one (``docs/benchmarks.md``, "Measured and not kept").
    """

    @staticmethod
    def forward(ctx, x: torch.Tensor) -> torch.Tensor:
        even = x.shape[-1] - x.shape[-1] % 2
        a, b = x[..., 0:even:2], x[..., 1:even:2]
        ctx.save_for_backward(a >= b)
        ctx.length = x.shape[-1]
        return torch.maximum(a, b)

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> torch.Tensor:
        (take_a,) = ctx.saved_tensors
        to_a = grad * take_a
        out = torch.stack((to_a, grad - to_a), dim=-1).flatten(-2)
        return nn.functional.pad(out, (0, ctx.length % 2))


class PairPool(nn.Module):
    """Pool non-overlapping pairs of positions (mean or max); floor on odd lengths.

    Same result as AvgPool1d(2) / MaxPool1d(2), but as two strided views and
    one elementwise op: PyTorch's CPU avg_pool1d runs through a 2-D pooling
    kernel that took a third of the encoder's inference time.
    """

    def __init__(self, mode: str = "avg") -> None:
        super().__init__()
        self.mode = mode

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``x`` pooled over pairs of positions (its last dimension halved, rounded down)."""
        if self.mode == "max" and torch.is_grad_enabled() and x.requires_grad:
            return _PairMax.apply(x)
        even = x.shape[-1] - x.shape[-1] % 2
        a, b = x[..., 0:even:2], x[..., 1:even:2]
        return (a + b) * 0.5 if self.mode == "avg" else torch.maximum(a, b)


class Encoder(nn.Module):
    """CNN encoder: ``(batch, window)`` uint8 codes -> ``(batch, D)`` embeddings."""

    def __init__(self, config: EncoderConfig) -> None:
        super().__init__()
        self.config = config
        self.register_buffer("one_hot", one_hot_table(), persistent=False)
        complement = torch.from_numpy(COMPLEMENT_CODE).long()
        self.register_buffer("complement", complement, persistent=False)
        branch_dim = config.embedding_dim // (config.ends * config.views)
        self.features, self.head = _branch(config, branch_dim)
        if config.ends == 2:
            self.features_3p, self.head_3p = _branch(config, branch_dim)

    def forward(self, codes: torch.Tensor) -> torch.Tensor:
        """The embeddings ``(batch, D)`` of ``(batch, window)`` codes."""
        if codes.dim() != 2 or codes.shape[1] != self.config.window:
            raise DnaembedError(
                f"encoder expects (batch, {self.config.window}) codes, got {tuple(codes.shape)}"
            )
        codes = codes.long()
        out = self._ends(codes)
        if self.config.views == 2:
            out = torch.cat([out, self._ends(self.complement[codes])], dim=1) * _VIEW_SCALE
        return out * self.config.scale

    def _ends(self, codes: torch.Tensor) -> torch.Tensor:
        """The read through the 5' branch, and through the 3' branch when there is one."""
        out = self.head(run_blocks(self.features, self.one_hot[codes].transpose(1, 2)))
        if self.config.ends == 2:
            y = self.one_hot[reverse_reads(codes)].transpose(1, 2)
            out = torch.cat([out, self.head_3p(run_blocks(self.features_3p, y))], dim=1)
        return out


_VIEW_SCALE = 1.0 / math.sqrt(2.0)


def run_blocks(layers: nn.Sequential, x: torch.Tensor) -> torch.Tensor:
    """Apply convolution blocks, each convolution + pair mean as one strided convolution.

    The mean of adjacent outputs of a convolution is itself a convolution, with one
    more tap, evaluated at every other position: the same values (to rounding) for
    a third less arithmetic and no pass over memory for the mean, which nearly
    halves inference time on CPU (``docs/benchmarks.md``). Dilated convolutions and
    max pooling run as written.
    """
    i = 0
    while i < len(layers):
        layer = layers[i]
        pool = layers[i + 1] if i + 1 < len(layers) else None
        if (isinstance(layer, nn.Conv1d) and isinstance(pool, PairPool)
                and pool.mode == "avg" and layer.dilation == (1,)):
            x = conv_pair_mean(layer, x)
            i += 2
        else:
            x = layer(x)
            i += 1
    return x


def conv_pair_mean(conv: nn.Conv1d, x: torch.Tensor) -> torch.Tensor:
    """``PairPool("avg")(conv(x))`` as one convolution of stride 2 (odd kernels, no dilation)."""
    w = conv.weight
    merged = 0.5 * (nn.functional.pad(w, (0, 1)) + nn.functional.pad(w, (1, 0)))
    return nn.functional.conv1d(x, merged, conv.bias, stride=2, padding=conv.padding)


def reverse_reads(codes: torch.Tensor) -> torch.Tensor:
    """Each padded read reversed in place (its 3' end first), padding left at the end."""
    n, window = codes.shape
    lengths = (codes != PAD_CODE).sum(dim=1, keepdim=True)
    pos = torch.arange(window, device=codes.device).expand(n, window)
    return codes.gather(1, torch.where(pos < lengths, lengths - 1 - pos, pos))


def _branch(config: EncoderConfig, dim: int) -> tuple[nn.Sequential, nn.Sequential]:
    """Convolution blocks and head of one encoder branch, to ``dim`` outputs."""
    layers: list[nn.Module] = []
    in_ch, length = 5, config.window
    dilations = config.dilations or [1] * len(config.channels)
    for out_ch, dil in zip(config.channels, dilations):
        pad = dil * (config.kernel_size // 2)
        for _ in range(config.convs_per_block - 1):
            layers += [
                nn.Conv1d(in_ch, out_ch, config.kernel_size, padding=pad, dilation=dil),
                nn.ReLU(),
            ]
            in_ch = out_ch
        layers += [
            nn.Conv1d(in_ch, out_ch, config.kernel_size, padding=pad, dilation=dil),
            PairPool(config.pool),
            nn.ReLU(),
        ]
        in_ch, length = out_ch, length // 2
    hidden = config.hidden_factor * dim
    head = nn.Sequential(
        nn.Flatten(),
        nn.Linear(in_ch * length, hidden),
        nn.ReLU(),
        nn.Linear(hidden, dim),
        nn.BatchNorm1d(dim),
    )
    return nn.Sequential(*layers), head


def squared_distance(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Row-wise squared Euclidean distance: the model's estimate of the edit distance."""
    return (a - b).pow(2).sum(dim=-1)


def count_parameters(model: nn.Module) -> int:
    """The number of weights in ``model``."""
    return int(sum(np.prod(p.shape) for p in model.parameters()))
