"""Regression losses between a predicted squared distance ``o`` and a true edit distance ``t``.

* ``chi2`` (the paper's default): ``o`` is modelled as chi-squared with ``t``
  degrees of freedom; the loss is its negative log-likelihood
  ``(t/2) ln 2 + lnGamma(t/2) - (t/2 - 1) ln o + o/2``.
  Its per-pair optimum is the mode ``o = max(t - 2, 0)``: biased low by 2.
  For ``t = 0`` the constant ``lnGamma(0)`` is infinite; it does not depend on
  ``o``, so it is dropped (the gradient, which drives ``o`` to 0, is unchanged).
* ``poisson`` (Wei, Guo et al., AAAI 2024): ``o - t ln o``, optimum ``o = t``.
  It is exactly twice the chi-squared NLL with ``t + 2`` degrees of freedom
  (minus constants): the unbiased member of the same family.
* ``mse``: ``(o - t)^2``, the plain baseline.

``o`` near 0 is handled by ``ln(o + eps)``: finite values and gradients
everywhere (a clamp would zero the gradient and strand such pairs).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

from dnaembed.errors import DnaembedError

EPS = 1e-3
LOSSES = ("chi2", "poisson", "mse")


def chi2_nll(o: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
    """Per-pair chi-squared negative log-likelihood of ``o`` with ``t`` degrees of freedom."""
    t = t.to(o.dtype)
    half = t / 2.0
    positive = t > 0
    const = torch.where(
        positive,
        half * math.log(2.0) + torch.lgamma(torch.where(positive, half, torch.ones_like(half))),
        torch.zeros_like(half),
    )
    return const - (half - 1.0) * torch.log(o + EPS) + o / 2.0


def poisson_nll(o: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
    """Per-pair Poisson negative log-likelihood of count ``t`` with rate ``o`` (no ``ln t!``)."""
    t = t.to(o.dtype)
    return o - t * torch.log(o + EPS)


def mse(o: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
    """Per-pair squared error."""
    return (o - t.to(o.dtype)) ** 2


def get_loss(name: str) -> Callable[[torch.Tensor, torch.Tensor], torch.Tensor]:
    """The per-pair loss function called ``name``."""
    table = {"chi2": chi2_nll, "poisson": poisson_nll, "mse": mse}
    try:
        return table[name]
    except KeyError:
        raise DnaembedError(f"unknown loss {name!r} (known: {', '.join(LOSSES)})") from None
