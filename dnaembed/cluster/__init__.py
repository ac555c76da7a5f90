"""Clustering methods: one estimator interface (see :mod:`dnaembed.cluster.base`).

``graph`` (default): embedding neighbours checked with exact Levenshtein,
linked with a guard, split where a cluster holds two groups, strays rescued
(in memory here; partitioned, on an executor, in :mod:`.partitioned`);
``kmeans``: Lloyd on the embedding-neighbour graph, optionally refined by exact
distances; ``dbscan``: DBSCAN on exact-checked neighbour distances, with an
HDBSCAN-style split of clusters that chain.
"""

from __future__ import annotations

from typing import Any

from dnaembed.cluster.base import Clusterer
from dnaembed.cluster.dbscan import DbscanClusterer
from dnaembed.cluster.graph import GraphClusterer
from dnaembed.cluster.kmeans import KMeansClusterer
from dnaembed.errors import DnaembedError

METHODS: dict[str, type[Clusterer]] = {
    "graph": GraphClusterer,
    "kmeans": KMeansClusterer,
    "dbscan": DbscanClusterer,
}


def make_clusterer(method: str = "graph", **params: Any) -> Clusterer:
    """The estimator for ``method`` with ``params`` (None values mean 'the default')."""
    try:
        cls = METHODS[method]
    except KeyError:
        raise DnaembedError(
            f"unknown clustering method {method!r} (known: {', '.join(METHODS)})"
        ) from None
    return cls(**{k: v for k, v in params.items() if v is not None})


__all__ = [
    "METHODS",
    "Clusterer",
    "DbscanClusterer",
    "GraphClusterer",
    "KMeansClusterer",
    "make_clusterer",
]
