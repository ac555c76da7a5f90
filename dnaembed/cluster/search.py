"""Candidate neighbours in embedding space (faiss).

The embedding only has to bring each read's true neighbours into a short list;
the exact Levenshtein check decides afterwards. So the index trades a little
recall for speed where the input is large:

* up to :data:`EXACT_LIMIT` vectors: ``IndexFlatL2``, exact (at that size about
  as fast as building a graph index);
* beyond: ``IndexHNSWFlat`` (M = :data:`HNSW_M`, efConstruction =
  :data:`HNSW_EF_CONSTRUCTION`, efSearch = max(32, 2 x the candidates asked of
  it)), near-linear in N. Reads of one strand are tight groups far from each
  other, and a sparser graph leaves islands that greedy search never reaches.
* Vectors wider than :data:`PROJECTED_DIM`, when there are at least
  :data:`PROJECT_MIN_ROWS` per projected dimension, get their graph built on a
  PCA projection (faiss ``PCAMatrix``; ``projected_dim``, ``cluster
  --index-dim``): the build's cost grows with the width. The graph proposes
  :data:`REFINE_FACTOR` times ``k`` candidates, re-ranked by their full-width
  distances (``IndexRefineFlat``), so the distances returned are the full
  embedding's.

The graph is built on one thread: faiss builds HNSW graphs in parallel with
locks, so a multi-threaded build may differ from run to run, and every dnaembed
output must depend on the seed only. Searching is parallel (queries are
independent). Distances are squared Euclidean (the embedding's estimate of the
edit distance). Why these choices: ``docs/algorithms.md`` (the search); the
recall and timing checks behind them: ``docs/benchmarks.md``.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import ModuleType

import numpy as np

from dnaembed.errors import DnaembedError

#: Largest number of indexed vectors searched exactly.
EXACT_LIMIT = 20_000
#: HNSW graph degree and construction beam (faiss defaults are 32 and 40).
HNSW_M = 32
HNSW_EF_CONSTRUCTION = 40
#: Vectors wider than this get their HNSW graph built on a PCA projection to this many
#: dimensions; candidates found there are re-ranked by their full-width distances.
PROJECTED_DIM = 64
#: Fewest vectors projected, per projected dimension: fewer rows than a few times the
#: projection's width give a covariance that is mostly noise (and such small graphs are
#: cheap at full width).
PROJECT_MIN_ROWS = 4
#: Candidates taken from the projected graph per neighbour asked for, before re-ranking.
REFINE_FACTOR = 2
#: Queries per faiss call: bounds the result buffers, whatever the input size.
QUERY_BATCH = 65_536


#: faiss computes an exact search by BLAS only from this many query entries (queries x
#: width) on; below, a direct loop. Its default, 128,000, is 2,000 queries at the search
#: space's 64 dimensions, and there the loop took 4.0-5.0 ns a distance against 1.6-2.6
#: by BLAS, for 20 to 1,900 queries among 4,000 to 24,000 vectors (one thread, AVX2),
#: with the same neighbours (the later rounds' cells and the threshold sample's have
#: fewer queries). Here: twenty queries at 64 dimensions.
BLAS_MIN_ENTRIES = 20 * 64


def faiss_module() -> ModuleType:
    """faiss, its exact search on BLAS from :data:`BLAS_MIN_ENTRIES` on. Every use of
    faiss goes through here, so that every process (the client, each worker) searches
    with the same setting whatever ran in it before: the setting is the process's, and
    the two ways round differ in the last bits of a distance."""
    import faiss

    faiss.cvar.distance_compute_blas_threshold = BLAS_MIN_ENTRIES
    return faiss


@dataclass
class Neighbours:
    """``k`` nearest indexed rows of each query: squared distances and row indices.

    Missing entries (fewer than ``k`` rows, or an approximate index that found
    fewer) have index -1 and distance +inf.
    """

    distances: np.ndarray  # float32 (n_queries, k)
    indices: np.ndarray  # int64 (n_queries, k)


class NeighbourIndex:
    """A faiss index over a set of vectors: exact when small, HNSW when large.

    ``kind`` is ``"auto"`` (by :data:`EXACT_LIMIT`), ``"exact"`` or ``"hnsw"``.
    ``projected_dim``: width of the PCA projection an HNSW graph is built on when
    the vectors are wider (0: build it on the vectors themselves).
    """

    def __init__(
        self,
        vectors: np.ndarray,
        *,
        kind: str = "auto",
        exact_limit: int = EXACT_LIMIT,
        projected_dim: int = PROJECTED_DIM,
    ):
        faiss = faiss_module()

        vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        if vectors.ndim != 2:
            raise DnaembedError(f"vectors must be a 2-D array, got shape {vectors.shape}")
        if kind == "auto":
            kind = "exact" if len(vectors) <= exact_limit else "hnsw"
        if kind not in ("exact", "hnsw"):
            raise DnaembedError(f"unknown index kind {kind!r} (use auto, exact or hnsw)")
        self.kind = kind
        self.size, self.dim = vectors.shape
        #: The width the search runs at (the projection's, where there is one).
        self.search_dim = self.dim
        if kind == "exact":
            self.index = faiss.IndexFlatL2(self.dim)
            self.index.add(vectors)
        else:
            if projected_dim < 0:
                raise DnaembedError(f"projected_dim must be >= 0, got {projected_dim}")
            project = 0 < projected_dim < self.dim and self.size >= PROJECT_MIN_ROWS * projected_dim
            self.graph = faiss.IndexHNSWFlat(projected_dim if project else self.dim, HNSW_M)
            self.graph.hnsw.efConstruction = HNSW_EF_CONSTRUCTION
            if project:
                self.search_dim = projected_dim
                projected = faiss.IndexPreTransform(
                    faiss.PCAMatrix(self.dim, projected_dim), self.graph
                )
                self.index = faiss.IndexRefineFlat(projected)
                self.index.k_factor = REFINE_FACTOR
                self.index.train(vectors)
            else:
                self.index = self.graph
            threads = faiss.omp_get_max_threads()
            faiss.omp_set_num_threads(1)  # deterministic graph (see the module notes)
            try:
                self.index.add(vectors)
            finally:
                faiss.omp_set_num_threads(threads)

    def search(self, queries: np.ndarray, k: int) -> Neighbours:
        """The ``k`` nearest indexed vectors of each query (itself included if indexed)."""
        queries = np.ascontiguousarray(queries, dtype=np.float32)
        n = len(queries)
        k_eff = max(0, min(k, self.size))
        dist = np.full((n, k), np.inf, dtype=np.float32)
        idx = np.full((n, k), -1, dtype=np.int64)
        if n == 0 or k_eff == 0:
            return Neighbours(dist, idx)
        if self.kind == "hnsw":
            factor = REFINE_FACTOR if self.index is not self.graph else 1
            self.graph.hnsw.efSearch = max(32, 2 * k_eff * factor)
        for start in range(0, n, QUERY_BATCH):
            d, i = self.index.search(queries[start : start + QUERY_BATCH], k_eff)
            dist[start : start + len(d), :k_eff] = d
            idx[start : start + len(i), :k_eff] = i
        dist[idx < 0] = np.inf
        return Neighbours(dist, idx)


def self_neighbours(index: NeighbourIndex, vectors: np.ndarray, k: int) -> Neighbours:
    """Each indexed vector's ``k`` nearest other vectors (itself removed).

    ``vectors`` must be the indexed vectors, in order. Exact duplicates may
    come back in any order, so the row itself is removed by index, not by
    position; when it is absent (an approximate index) the last column goes.
    """
    found = index.search(vectors, k + 1)
    n = len(vectors)
    rows = np.arange(n)[:, None]
    is_self = found.indices == rows
    # Drop the self column where present, else the farthest one.
    drop = np.where(is_self.any(axis=1), is_self.argmax(axis=1), k)
    keep = np.ones_like(is_self)
    keep[np.arange(n), drop] = False
    return Neighbours(
        found.distances[keep].reshape(n, k), found.indices[keep].reshape(n, k)
    )
