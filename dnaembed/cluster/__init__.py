"""Clustering methods: one estimator interface (see :mod:`dnaembed.cluster.base`).

``graph`` (default): embedding neighbours checked with exact Levenshtein and
linked with a guard; ``kmeans``: faiss k-means on the embeddings; ``dbscan``:
scikit-learn DBSCAN on a sparse embedding-neighbour graph.
"""

from __future__ import annotations

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


def make_clusterer(method: str = "graph", **params) -> Clusterer:
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
