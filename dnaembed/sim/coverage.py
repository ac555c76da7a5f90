"""How many reads each strand gets: the coverage models of a sequencing run.

Real coverage is uneven (skewed, some strands lost entirely); the models here
are the usual ones for DNA-storage runs. Every draw takes a numpy Generator.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dnaembed.errors import DnaembedError

COVERAGE_MODELS = ("fixed", "poisson", "negbin", "lognormal")


@dataclass(frozen=True)
class Coverage:
    """Reads per strand.

    * ``fixed``: every strand gets ``round(mean)`` reads;
    * ``poisson``: Poisson(mean);
    * ``negbin``: negative binomial with ``mean`` and ``dispersion`` k
      (variance = mean + mean^2 / k; smaller k, more skew);
    * ``lognormal``: Poisson with a lognormal rate of that ``mean`` and log-sd ``sigma``.

    ``dropout`` is the fraction of strands that get no read at all (lost in
    synthesis or PCR), drawn before the model.
    """

    model: str = "negbin"
    mean: float = 10.0
    dispersion: float = 5.0
    sigma: float = 0.5
    dropout: float = 0.0

    def __post_init__(self) -> None:
        if self.model not in COVERAGE_MODELS:
            raise DnaembedError(
                f"unknown coverage model {self.model!r} (known: {', '.join(COVERAGE_MODELS)})"
            )
        if not self.mean > 0:
            raise DnaembedError(f"coverage mean must be > 0, got {self.mean}")
        if not self.dispersion > 0:
            raise DnaembedError(f"coverage dispersion must be > 0, got {self.dispersion}")
        if not self.sigma >= 0:
            raise DnaembedError(f"coverage sigma must be >= 0, got {self.sigma}")
        if not 0 <= self.dropout < 1:
            raise DnaembedError(f"dropout fraction must be in [0, 1), got {self.dropout}")

    def expected_variance(self) -> float:
        """Variance of reads per strand under the model (before dropout)."""
        m = self.mean
        if self.model == "fixed":
            return 0.0
        if self.model == "poisson":
            return m
        if self.model == "negbin":
            return m + m * m / self.dispersion
        return m + m * m * (np.exp(self.sigma**2) - 1.0)

    def draw(self, n_strands: int, rng: np.random.Generator) -> np.ndarray:
        """Reads per strand for ``n_strands`` strands."""
        m = self.mean
        if self.model == "fixed":
            counts = np.full(n_strands, int(round(m)), dtype=np.int64)
        elif self.model == "poisson":
            counts = rng.poisson(m, size=n_strands)
        elif self.model == "negbin":
            k = self.dispersion
            counts = rng.negative_binomial(k, k / (k + m), size=n_strands)
        else:
            mu = np.log(m) - self.sigma**2 / 2.0
            counts = rng.poisson(rng.lognormal(mu, self.sigma, size=n_strands))
        counts = counts.astype(np.int64)
        if self.dropout > 0 and n_strands:
            lost = rng.choice(n_strands, size=int(round(self.dropout * n_strands)), replace=False)
            counts[lost] = 0
        return counts
