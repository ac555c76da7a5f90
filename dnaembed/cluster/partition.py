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

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from dnaembed.cluster.search import faiss_module
from dnaembed.errors import DnaembedError

#: Width of the search space when the model's vectors are wider.
SEARCH_DIM = 64
#: Reads per cell, the default of ``--partition-size``. Smaller cells cost less (a cell's
#: exact search costs its members; bench_scale tables of the thirty-fourth session, 2
#: cores, AVX2: 10^6 reads in 76.6 s at 2,048 against 85.7 at 4,096, 3 x 10^6 under
#: --memory 2G 291.2 against 292.1 s) but are not the default: they hold fewer of a
#: strand's far pairs, so the threshold's sample sees a shorter tail (ldpc-exp7, the
#: thirty-fifth session's sample, seeds 0-3: cut 21 at each, A_0.9 0.9748 on average
#: against 0.9771 at 4,096), and more cells cost the assignment and the budget's gathers
#: more as the input grows (docs/scaling.md).
PARTITION_SIZE = 4_096
#: k-means iterations, and training points per cell (faiss subsamples beyond it).
KMEANS_ITERATIONS = 20
KMEANS_POINTS_PER_CELL = 256
#: Entries of the distance matrix per block when assigning reads to cells (2 MB in
#: float64). Blocks of 8,192 rows made each of the block's arrays 48 MB at 733 cells (3 x
#: 10^6 reads), fresh pages on every allocation: assigning took 1.4-2.3x the CPU of
#: blocks that stay in cache (scripts/bench_assign.py).
ASSIGN_ENTRIES = 1 << 18
#: Rows per block at most, of reads and of the centroids' distances to one another: a
#: block's temporaries stay in cache whatever the number of cells.
ASSIGN_ROWS = 1_024
#: Fraction of a block's distances past the screen beyond which their float64 dot products
#: come from one product of the block with every centroid (:func:`_dot_products`). The
#: rounds' cells, with their wider margin, let ~15% through (16 of 108 at 3 x 10^6 reads),
#: round 1's ~1% (6 of 733): on 200,000 of the model's vectors, one thread, the rounds'
#: assignment took 4.0 us a read against 6.5 pair by pair (2.0 against 2.8 at 31 cells);
#: round 1's 5.1 against 3.8 with the product. The two ways differ only in float64
#: rounding (the same cells there and in the tests), and a block's way depends on the
#: block alone, so its cells do not depend on where it is assigned.
DENSE_SCREEN = 0.05
#: Room for float32's rounding when a read's cells are screened, a fraction of
#: ``(|y| + |c|)^2``: a product of 64 terms errs by at most ~4e-6 of ``|y| |c|``, so
#: no cell within the margin is screened out; those let through are checked in float64.
SCREEN_SLACK = 1e-4


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
    #: The centroids' distances to one another and what else assigning needs, made on
    #: first use in each process (not pickled with the tasks): ``(centroids, margin,
    #: geometry)``.
    _cached: tuple | None = field(default=None, init=False, repr=False, compare=False)

    def __getstate__(self) -> dict:
        return {**self.__dict__, "_cached": None}

    @property
    def cells(self) -> int:
        """The number of cells (centroids)."""
        return len(self.centroids)

    @property
    def dim(self) -> int:
        """Dimensions of the search space (the centroids')."""
        return self.centroids.shape[1]

    def project(self, vectors: np.ndarray) -> np.ndarray:
        """Vectors in the search space (float32)."""
        x = np.asarray(vectors, dtype=np.float32)
        if self.components is None:
            return np.ascontiguousarray(x)
        return ((x.astype(np.float64) - self.mean) @ self.components).astype(np.float32)

    def assign(self, vectors: np.ndarray) -> np.ndarray:
        """Cells of each (search-space) vector: ``(n, max_cells)`` int32, nearest first, -1 pad.

        After the nearest, the cells whose boundary is within the margin, closest
        boundary first (ties: the lower cell)."""
        n = len(vectors)
        out = np.full((n, self.max_cells), -1, dtype=np.int32)
        if self.cells == 1:
            out[:, 0] = 0
            return out
        geometry = self._geometry()
        for start, y, d2 in self._distances(vectors, geometry):
            nearest = np.argmin(d2, axis=1)
            out[start : start + len(y), 0] = nearest
            rows, cols, rank = self._within_margin(y, d2, nearest, geometry)
            out[start + rows, 1 + rank] = cols
        return out

    def nearest(self, vectors: np.ndarray) -> np.ndarray:
        """Each (search-space) vector's nearest cell (int32): column 0 of :meth:`assign`."""
        out = np.zeros(len(vectors), dtype=np.int32)
        for start, y, d2 in self._distances(vectors, self._geometry()):
            out[start : start + len(y)] = np.argmin(d2, axis=1)
        return out

    def _geometry(self) -> _CellGeometry:
        """The centroids' :class:`_CellGeometry`, made on first use in each process."""
        key = (self.centroids, self.margin)
        if self._cached is None or self._cached[0] is not key[0] or self._cached[1] != key[1]:
            self._cached = (*key, _CellGeometry.of(self.centroids, self.margin))
        return self._cached[2]

    def _distances(self, vectors: np.ndarray, geometry: _CellGeometry):
        """Blocks of rows: ``(start, y, |y - c|^2 - |y|^2)``, ``y`` as given and the
        distances in float32, about the centroids' mean (their rounding then scales with
        the cells' spread, not with how far they lie from the origin). The assignment
        costs the number of cells, which grows with the input; in float64 the product
        took twice the time (the whole assignment at 1,466 cells, 3 x 10^6 reads in cells of
        2,048: 9.0 µs a read with float64 on AVX2, 5.1 with float32; bench_assign.py)."""
        batch = min(ASSIGN_ROWS, max(64, ASSIGN_ENTRIES // self.cells))
        for start in range(0, len(vectors), batch):
            y = np.asarray(vectors[start : start + batch])
            centred = y.astype(np.float32) - geometry.origin
            # -2 y.c from the product itself, |c|^2 added in place: one pass over the block
            # and no temporary, the same bits as |c|^2 - 2 (y.c) (a power of two scales
            # every term of the sum exactly).
            d2 = centred @ geometry.minus_twice32.T
            yield start, y, np.add(d2, geometry.norms32, out=d2)

    def _within_margin(self, y: np.ndarray, d2: np.ndarray, nearest: np.ndarray,
                       geometry: _CellGeometry) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The other cells whose boundary is within the margin: ``(rows, cells, rank)``,
        rank 0 the closest boundary, at most ``max_cells - 1`` a row. ``d2`` is overwritten.

        A read's distance to the boundary between its nearest cell ``i`` and a cell ``j``
        is ``(|y - c_j|^2 - |y - c_i|^2) / (2 |c_i - c_j|)``. The whole matrix is only
        screened, multiplied out in float32 and with room for its rounding
        (:data:`SCREEN_SLACK`); the few cells that pass (2-4 a read) have the distance
        worked out in float64, the nearest among them kept. Dividing every one, then
        taking the closest ``max_cells`` times over all, cost 1.4x the CPU at 2,444
        cells (scripts/bench_assign.py).
        """
        rows = np.arange(len(d2))
        centred = y.astype(np.float64) - geometry.origin
        scale = np.sqrt((centred * centred).sum(axis=1)) + geometry.largest
        floor = d2[rows, nearest] + (SCREEN_SLACK * scale * scale).astype(np.float32)
        diff = np.subtract(d2, floor[:, None], out=d2)
        r, j = np.divmod(np.flatnonzero(diff <= geometry.reach[nearest]), d2.shape[1])
        not_nearest = j != nearest[r]
        r, j = r[not_nearest], j[not_nearest]
        i = nearest[r]
        # |y - c_j|^2 - |y - c_i|^2 = (|c_j|^2 - 2 y.c_j) - (|c_i|^2 - 2 y.c_i), in float64.
        y_dot_c = _dot_products(centred, geometry.centroids64, nearest, r, j)
        norms = geometry.norms64
        to_nearest = norms[nearest] - 2 * y_dot_c(rows, nearest)
        exact = norms[j] - 2 * y_dot_c(r, j) - to_nearest[r]
        with np.errstate(divide="ignore", invalid="ignore"):
            boundary = exact / (2 * geometry.gaps[i, j])
        # Not a cell with the same centroid as the nearest (0/0).
        keep = np.isfinite(boundary) & (boundary <= self.margin)
        r, j, boundary = r[keep], j[keep], boundary[keep]
        # Already by row, then cell: a stable sort by boundary within rows keeps ties by cell.
        order = np.lexsort((boundary, r))
        r, j = r[order], j[order]
        rank = np.arange(len(r)) - np.searchsorted(r, r)
        taken = rank < self.max_cells - 1
        return r[taken], j[taken], rank[taken]


def _dot_products(y: np.ndarray, c: np.ndarray, nearest: np.ndarray, r: np.ndarray,
                  j: np.ndarray) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
    """``y_dot_c(rows, cells)``: the float64 dot products of reads and centroids that
    :meth:`Partitioner._within_margin` needs (each row's nearest and the pairs ``r, j``).

    Pair by pair where few pairs passed the screen; from one product of the block with
    every centroid where many did (:data:`DENSE_SCREEN`): gathering a row and a
    centroid per pair then costs more than the product.
    """
    if len(r) + len(nearest) <= DENSE_SCREEN * len(y) * len(c):
        return lambda rows, cells: np.einsum("ij,ij->i", y[rows], c[cells])
    products = y @ c.T
    return lambda rows, cells: products[rows, cells]


@dataclass
class _CellGeometry:
    """What assigning reads to the cells needs of the centroids, made once per process:
    the centroids about their mean (``origin``), in float32 and float64."""

    origin: np.ndarray  # float32
    minus_twice32: np.ndarray  # -2 c
    norms32: np.ndarray  # |c|^2
    centroids64: np.ndarray
    norms64: np.ndarray
    gaps: np.ndarray  # |c_i - c_j|, float64
    reach: np.ndarray  # 2 margin |c_i - c_j|, float32: the screen's
    largest: float  # the largest |c|

    @classmethod
    def of(cls, centroids: np.ndarray, margin: float) -> _CellGeometry:
        """``gaps`` in blocks of rows that stay in cache (the whole matrix's temporaries at
        once took ten times as long; 48 MB at 2,444 cells)."""
        c = centroids.astype(np.float64)
        origin = _round_origin(c.mean(axis=0), np.sqrt(c.var(axis=0).mean()))
        c -= origin
        norms = (c * c).sum(axis=1)
        gaps = np.empty((len(c), len(c)))
        for start in range(0, len(c), ASSIGN_ROWS):
            block = slice(start, start + ASSIGN_ROWS)
            gaps[block] = np.sqrt(np.maximum(
                norms[block, None] + norms[None, :] - 2 * (c[block] @ c.T), 0.0))
        return cls(origin, -2 * c.astype(np.float32), norms.astype(np.float32), c, norms, gaps,
                   (gaps * (2 * margin)).astype(np.float32),
                   float(np.sqrt(norms.max(initial=0.0))))


def _round_origin(mean: np.ndarray, spread: float) -> np.ndarray:
    """The centroids' mean rounded to a power of two near their spread (float32), so that
    vectors of few significant bits (ties between cells, in the tests) stay exact about
    it, and any others lie about it as the cells do."""
    step = 2.0 ** np.floor(np.log2(spread)) if spread > 0 else 1.0
    return (np.round(mean / step) * step).astype(np.float32)


def fit_partitioner(
    sample: np.ndarray,
    *,
    cells: int,
    search_dim: int = SEARCH_DIM,
    margin: float,
    max_cells: int,
    seed: int = 0,
    threads: int | None = None,
) -> Partitioner:
    """Fit the projection and the quantizer on a sample of the model's vectors.

    ``margin``: in units of the sample's spread in the search space (the root
    mean square of its per-dimension standard deviations), so that it means
    the same for models of other widths and scales. ``threads``: of the k-means
    (None: faiss's setting for the calling thread); the cells are the same on any.
    """
    faiss = faiss_module()

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
    _train(kmeans, y, threads)
    part.centroids = np.ascontiguousarray(kmeans.centroids, dtype=np.float32)
    return part


def _train(kmeans, y: np.ndarray, threads: int | None) -> None:
    """Train faiss's k-means on ``threads`` threads (None: as many as faiss has on this
    thread), numpy's BLAS included, which the tasks may hold to one.

    The centroids do not depend on the number of threads: faiss splits the distances
    by points and the centroids' sums by centroid, each summing its points in their
    order, and the OpenBLAS of faiss-cpu's wheels splits a matrix product by rows and
    columns, not along the sums (found bit-identical on 1 to 16 threads;
    tests/test_partitioned.py checks 1 and 3). On one thread the fit was the longest
    serial step of 10^7 reads (55 s on the GPU machine's client, docs/scaling.md).
    """
    from threadpoolctl import threadpool_limits

    faiss = faiss_module()
    before = faiss.omp_get_max_threads()
    threads = threads or before
    faiss.omp_set_num_threads(threads)
    try:
        with threadpool_limits(limits=threads, user_api="blas"):
            kmeans.train(y)
    finally:
        faiss.omp_set_num_threads(before)


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
    keys = flat[position]
    if n_cells < 1 << 16:
        # numpy sorts 16-bit keys stably by radix: 0.11 s of CPU against 0.70 as int32 for
        # 3 x 10^6 reads' 9 x 10^6 entries in 733 cells.
        keys = keys.astype(np.uint16)
    # A stable sort by cell keeps each cell's members in row order.
    order = np.argsort(keys, kind="stable")
    position = position[order]
    bounds = np.searchsorted(keys[order], np.arange(n_cells + 1).astype(keys.dtype))
    rows = (position // width).astype(np.int32)
    return [rows[bounds[c] : bounds[c + 1]] for c in range(n_cells)]


def pairs_sharing_a_partition(lo: np.ndarray, hi: np.ndarray, cells: np.ndarray) -> np.ndarray:
    """True for pairs of which one read's nearest cell holds the other (both are searched there)."""
    lo_home, hi_home = cells[lo, 0], cells[hi, 0]
    return (cells[hi] == lo_home[:, None]).any(axis=1) | (cells[lo] == hi_home[:, None]).any(
        axis=1)
