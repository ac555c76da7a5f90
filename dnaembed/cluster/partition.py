"""Reads into partitions by their embedding, so that reads of one strand share a partition.

The search space: the model's vectors, or, when they are wider than
``search_dim``, their projection onto the ``search_dim`` principal axes of a
sample (PCA, in float64). The partitions: the cells of a k-means coarse
quantizer trained on a seeded sample (faiss, one thread, so the centroids
depend on the seed only). Each read belongs to its nearest cell and to every
other cell whose boundary is within ``margin`` of it, up to ``max_cells`` cells.

Why a margin in distance to the boundary: for a read ``a`` in cell ``i`` and
any other cell ``j``, ``(|a - c_j|^2 - |a - c_i|^2) / (2 |c_i - c_j|)`` is
``a``'s distance to the hyperplane between the two cells. A read ``b`` whose
nearest cell is ``j`` lies on ``j``'s side of that plane, so when
``|a - b| <= margin``, ``a`` is within ``margin`` of it and is a member of
``j`` too: every pair of reads closer than ``margin`` shares the nearest cell
of each of its reads (unless ``max_cells`` cut the list). Searching each
read's neighbours in its nearest cell, among all members, therefore finds
every neighbour within ``margin``, as a search over all reads would. Beyond
the margin pairs may be lost; :func:`pairs_sharing_a_partition` measures it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dnaembed.errors import DnaembedError

#: Width of the search space when the model's vectors are wider.
SEARCH_DIM = 64
#: k-means iterations, and training points per cell (faiss subsamples beyond it).
KMEANS_ITERATIONS = 20
KMEANS_POINTS_PER_CELL = 256
#: Entries of the distance matrix per block when assigning reads to cells (2 MB in
#: float64). Blocks of 8,192 rows made each of the block's arrays 48 MB at 733 cells (3 x
#: 10^6 reads), fresh pages on every allocation: assigning took 1.4-2.3x the CPU of
#: blocks that stay in cache (scripts/bench_assign.py).
ASSIGN_ENTRIES = 1 << 18


@dataclass
class Partitioner:
    """A projection into the search space and the cells of a coarse quantizer.

    ``mean``/``components``: the projection (None: the vectors as they are);
    ``centroids``: ``(cells, dim)``; ``margin``: Euclidean distance to a cell's
    boundary within which a read joins that cell too (:func:`fit_partitioner`
    sets it from a factor of the sample's spread); ``max_cells``: cells per
    read at most.
    """

    mean: np.ndarray | None
    components: np.ndarray | None
    centroids: np.ndarray
    margin: float
    max_cells: int

    @property
    def cells(self) -> int:
        return len(self.centroids)

    @property
    def dim(self) -> int:
        return self.centroids.shape[1]

    def project(self, vectors: np.ndarray) -> np.ndarray:
        """Vectors in the search space (float32)."""
        x = np.asarray(vectors, dtype=np.float32)
        if self.components is None:
            return np.ascontiguousarray(x)
        return ((x.astype(np.float64) - self.mean) @ self.components).astype(np.float32)

    def assign(self, vectors: np.ndarray) -> np.ndarray:
        """Cells of each (search-space) vector: ``(n, max_cells)`` int32, nearest first, -1 pad."""
        n = len(vectors)
        out = np.full((n, self.max_cells), -1, dtype=np.int32)
        if self.cells == 1:
            out[:, 0] = 0
            return out
        c = self.centroids.astype(np.float64)
        c_norm = (c * c).sum(axis=1)
        gap = np.sqrt(np.maximum(
            c_norm[:, None] + c_norm[None, :] - 2 * (c @ c.T), 0.0))  # |c_i - c_j|
        batch = max(64, ASSIGN_ENTRIES // self.cells)
        for start in range(0, n, batch):
            y = np.asarray(vectors[start : start + batch], dtype=np.float64)
            d2 = c_norm[None, :] - 2 * (y @ c.T)  # |y - c|^2 less |y|^2: same order
            nearest = np.argmin(d2, axis=1)
            rows = np.arange(len(y))
            with np.errstate(divide="ignore", invalid="ignore"):
                boundary = (d2 - d2[rows, nearest][:, None]) / (2 * gap[nearest])
            boundary[rows, nearest] = -1.0  # the nearest cell first
            boundary[~np.isfinite(boundary)] = np.inf  # identical centroids: never twice
            take = min(self.max_cells, self.cells)
            best, closest = _closest(boundary, take)
            inside = closest <= self.margin
            out[start : start + len(y), :take] = np.where(inside, best, -1)
        return out


def _closest(boundary: np.ndarray, take: int) -> tuple[np.ndarray, np.ndarray]:
    """Per row, the ``take`` columns of smallest value, in order (ties by column number),
    and their values.

    ``take`` passes of a minimum (the first of equal values: the lowest column), not
    a sort of every row, which would cost each read the log of the number of cells,
    and that grows with the input. ``boundary`` is overwritten."""
    n = len(boundary)
    # Rows with fewer finite values than taken (identical centroids): a stable sort.
    short = np.flatnonzero(np.isfinite(boundary).sum(axis=1) < take)
    by_sort = np.argsort(boundary[short], axis=1, kind="stable")[:, :take]
    by_sort_values = np.take_along_axis(boundary[short], by_sort, axis=1)
    rows = np.arange(n)
    best = np.empty((n, take), dtype=np.int64)
    values = np.empty((n, take), dtype=boundary.dtype)
    for j in range(take):
        col = np.argmin(boundary, axis=1)
        best[:, j], values[:, j] = col, boundary[rows, col]
        boundary[rows, col] = np.inf
    best[short], values[short] = by_sort, by_sort_values
    return best, values


def fit_partitioner(
    sample: np.ndarray,
    *,
    cells: int,
    search_dim: int = SEARCH_DIM,
    margin: float,
    max_cells: int,
    seed: int = 0,
) -> Partitioner:
    """Fit the projection and the quantizer on a sample of the model's vectors.

    ``margin``: in units of the sample's spread in the search space (the root
    mean square of its per-dimension standard deviations), so that it means
    the same for models of other widths and scales.
    """
    import faiss

    x = np.asarray(sample, dtype=np.float32)
    if x.ndim != 2 or len(x) == 0:
        raise DnaembedError(f"the partition sample must be a non-empty 2-D array, got {x.shape}")
    mean = components = None
    if 0 < search_dim < x.shape[1]:
        mean, components = _principal_axes(x, search_dim)
    part = Partitioner(mean, components, np.zeros((1, 0), np.float32), 0.0, max_cells)
    y = part.project(x)
    part.margin = float(margin * np.sqrt(y.astype(np.float64).var(axis=0).mean()))
    cells = max(1, min(cells, len(y)))
    if cells == 1:
        part.centroids = y.mean(axis=0, keepdims=True).astype(np.float32)
        return part
    kmeans = faiss.Kmeans(y.shape[1], cells, niter=KMEANS_ITERATIONS, seed=seed, verbose=False,
                          max_points_per_centroid=KMEANS_POINTS_PER_CELL)
    threads = faiss.omp_get_max_threads()
    faiss.omp_set_num_threads(1)  # the centroids must not depend on the number of threads
    try:
        kmeans.train(y)
    finally:
        faiss.omp_set_num_threads(threads)
    part.centroids = np.ascontiguousarray(kmeans.centroids, dtype=np.float32)
    return part


def _principal_axes(x: np.ndarray, dim: int) -> tuple[np.ndarray, np.ndarray]:
    """Mean and the ``dim`` leading principal axes (float64), signs fixed for determinism."""
    x64 = x.astype(np.float64)
    mean = x64.mean(axis=0)
    centred = x64 - mean
    values, vectors = np.linalg.eigh(centred.T @ centred)
    axes = vectors[:, np.argsort(values)[::-1][:dim]]
    # An eigenvector's sign is arbitrary: make each axis's largest entry positive.
    signs = np.sign(axes[np.abs(axes).argmax(axis=0), np.arange(dim)])
    return mean, axes * np.where(signs == 0, 1.0, signs)


def members_of_cells(cells: np.ndarray, n_cells: int) -> list[np.ndarray]:
    """Each cell's members: rows of ``cells`` (:meth:`Partitioner.assign`), increasing, int32."""
    width = cells.shape[1]
    flat = cells.reshape(-1)
    position = np.flatnonzero(flat >= 0)
    # A stable sort by cell keeps each cell's members in row order.
    position = position[np.argsort(flat[position], kind="stable")]
    bounds = np.searchsorted(flat[position], np.arange(n_cells + 1))
    rows = (position // width).astype(np.int32)
    return [rows[bounds[c] : bounds[c + 1]] for c in range(n_cells)]


def pairs_sharing_a_partition(lo: np.ndarray, hi: np.ndarray, cells: np.ndarray) -> np.ndarray:
    """True for pairs of which one read's nearest cell holds the other (both are searched there)."""
    lo_home, hi_home = cells[lo, 0], cells[hi, 0]
    return (cells[hi] == lo_home[:, None]).any(axis=1) | (cells[lo] == hi_home[:, None]).any(
        axis=1)
