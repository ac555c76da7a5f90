import numpy as np
import pytest

from dnaembed.cluster.search import (
    BLAS_MIN_ENTRIES,
    NeighbourIndex,
    faiss_module,
    self_neighbours,
)
from dnaembed.errors import DnaembedError


def clustered_vectors(n_centres=50, per_centre=8, dim=16, seed=0):
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(n_centres, dim)) * 10
    x = np.repeat(centres, per_centre, axis=0) + rng.normal(size=(n_centres * per_centre, dim))
    return x.astype(np.float32), np.repeat(np.arange(n_centres), per_centre)


def test_exact_index_returns_the_true_nearest_rows():
    x, _ = clustered_vectors()
    found = NeighbourIndex(x, kind="exact").search(x[:20], 5)
    brute = ((x[:20, None, :] - x[None, :, :]) ** 2).sum(-1)
    expected = np.argsort(brute, axis=1, kind="stable")[:, :5]
    assert np.array_equal(np.sort(found.indices, axis=1), np.sort(expected, axis=1))
    assert np.allclose(np.sort(found.distances, axis=1), np.sort(brute, axis=1)[:, :5], atol=1e-2)


def test_small_batches_go_to_blas_and_find_the_true_nearest_rows():
    # Below faiss's own threshold (2,000 queries at 64 dimensions), now by BLAS.
    x, _ = clustered_vectors(n_centres=100, dim=64)
    index = NeighbourIndex(x, kind="exact")
    assert faiss_module().cvar.distance_compute_blas_threshold == BLAS_MIN_ENTRIES
    for n in (20, 300):
        found = index.search(x[:n], 6)
        brute = ((x[:n, None, :] - x[None, :, :]) ** 2).sum(-1)
        expected = np.argsort(brute, axis=1, kind="stable")[:, :6]
        assert np.array_equal(np.sort(found.indices, axis=1), np.sort(expected, axis=1))
        assert np.allclose(np.sort(found.distances, axis=1), np.sort(brute, axis=1)[:, :6],
                           atol=1e-2)


def test_auto_switches_to_hnsw_beyond_the_limit_and_finds_the_same_groups():
    x, group = clustered_vectors()
    small = NeighbourIndex(x, exact_limit=len(x))
    large = NeighbourIndex(x, exact_limit=10)
    assert (small.kind, large.kind) == ("exact", "hnsw")
    nb = self_neighbours(large, x, 7)
    # Every read's 7 nearest are the other reads of its group (groups are far apart).
    assert (group[nb.indices] == group[:, None]).mean() > 0.99


def test_hnsw_is_deterministic():
    x, _ = clustered_vectors(seed=3)
    a = self_neighbours(NeighbourIndex(x, kind="hnsw"), x, 6).indices
    b = self_neighbours(NeighbourIndex(x, kind="hnsw"), x, 6).indices
    assert np.array_equal(a, b)


def test_self_neighbours_drop_the_row_itself_even_among_duplicates():
    x = np.zeros((5, 4), dtype=np.float32)  # all identical: ties everywhere
    nb = self_neighbours(NeighbourIndex(x), x, 4)
    for i, row in enumerate(nb.indices):
        assert i not in row
        assert sorted(row) == sorted(set(range(5)) - {i})


def test_fewer_rows_than_k_pads_with_minus_one():
    x, _ = clustered_vectors(n_centres=1, per_centre=3)
    nb = self_neighbours(NeighbourIndex(x), x, 5)
    assert nb.indices.shape == (3, 5)
    assert (nb.indices[:, 2:] == -1).all() and np.isinf(nb.distances[:, 2:]).all()
    assert NeighbourIndex(x).search(x[:0], 3).indices.shape == (0, 3)


def test_bad_index_kind_is_an_error():
    with pytest.raises(DnaembedError, match="unknown index kind"):
        NeighbourIndex(np.zeros((3, 2), np.float32), kind="ivf")


def test_hnsw_reaches_every_tight_group():
    # Reads of one strand are tight groups far apart; a sparse HNSW graph (M = 16) leaves
    # some groups unreachable (here ~3% of neighbours missed), the index's M must not.
    rng = np.random.default_rng(0)
    centres = rng.normal(size=(5000, 64)) * 3
    x = (np.repeat(centres, 4, axis=0) + rng.normal(size=(20000, 64)) * 0.3).astype(np.float32)
    group = np.repeat(np.arange(5000), 4)
    nb = self_neighbours(NeighbourIndex(x, kind="hnsw"), x, 3)
    assert (group[nb.indices] == group[:, None]).mean() >= 0.995


def test_wide_vectors_are_searched_on_a_projection_and_reranked_at_full_width():
    # The bundled model's vectors are 512-d: the graph is built on a PCA projection and its
    # candidates re-ranked, so the distances returned must be the full-width ones.
    from dnaembed.cluster import search

    x, group = clustered_vectors(n_centres=100, per_centre=6, dim=4 * search.PROJECTED_DIM)
    index = NeighbourIndex(x, kind="hnsw")
    assert index.search_dim == index.graph.d == search.PROJECTED_DIM < index.dim
    nb = self_neighbours(index, x, 5)
    assert (group[nb.indices] == group[:, None]).mean() > 0.99
    full_width = ((x[:, None, :] - x[nb.indices]) ** 2).sum(-1)
    assert np.allclose(nb.distances, full_width, rtol=1e-4, atol=1e-2)
    assert (np.diff(nb.distances, axis=1) >= 0).all()
    again = self_neighbours(NeighbourIndex(x, kind="hnsw"), x, 5)
    assert np.array_equal(nb.indices, again.indices)


def test_too_few_wide_vectors_for_a_projection_are_searched_at_full_width():
    from dnaembed.cluster import search

    x, group = clustered_vectors(n_centres=10, per_centre=3, dim=2 * search.PROJECTED_DIM)
    index = NeighbourIndex(x, kind="hnsw")
    assert index.search_dim == index.graph.d == index.dim
    nb = self_neighbours(index, x, 2)
    assert (group[nb.indices] == group[:, None]).all()
    # And so are vectors when the projection is turned off.
    many, _ = clustered_vectors(n_centres=100, per_centre=6, dim=2 * search.PROJECTED_DIM)
    assert NeighbourIndex(many, kind="hnsw", projected_dim=0).search_dim == many.shape[1]
    with pytest.raises(DnaembedError, match="projected_dim"):
        NeighbourIndex(many, kind="hnsw", projected_dim=-1)
