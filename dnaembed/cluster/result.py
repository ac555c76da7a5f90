"""The result of clustering a list of reads: labels, orientations, representatives."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from dnaembed.cluster.threshold import Threshold
from dnaembed.encoding import reverse_complement


@dataclass
class ClusterResult:
    """Clusters of a list of reads (indices refer to that list).

    ``labels``: cluster id of each read, ``0..n_clusters-1`` by decreasing size;
    ``orientation``: 1 where the read is the reverse complement of its cluster's
    representative (all 0 with ``strand='plus'``); ``representatives``: the
    representative read of each cluster; ``timings``: seconds per stage.
    """

    labels: np.ndarray
    orientation: np.ndarray
    representatives: np.ndarray
    strand: str
    method: str
    threshold: Threshold | None = None
    timings: dict[str, float] = field(default_factory=dict)
    stats: dict[str, object] = field(default_factory=dict)

    @property
    def n_clusters(self) -> int:
        """The number of clusters."""
        return len(self.representatives)

    def sizes(self) -> np.ndarray:
        """Reads per cluster."""
        return np.bincount(self.labels, minlength=self.n_clusters)

    def members(self) -> list[np.ndarray]:
        """Read indices of each cluster, in cluster order (each sorted)."""
        order = np.argsort(self.labels, kind="stable")
        bounds = np.cumsum(self.sizes())[:-1]
        return np.split(order, bounds) if self.n_clusters else []

    def oriented(self, seqs: Sequence[str], index: int) -> str:
        """Read ``index`` in its cluster's orientation (reverse-complemented where needed)."""
        seq = seqs[index]
        return reverse_complement(seq) if self.orientation[index] else seq
