"""Density clusters over a sparse graph of exact distances (DBSCAN, split as HDBSCAN does).

The input is a set of verified pairs: read pairs whose exact edit distance is
within ``eps`` (each pair with its parity, see :mod:`dnaembed.cluster.candidates`).

* **Core reads** (DBSCAN): a read is core when it and the reads within ``eps`` of
  it weigh at least ``min_samples`` (collapsed copies count). Its *core
  distance* is the radius at which that weight is reached: small in a dense
  strand, large for a noisy read.
* **Links**: core reads are joined in increasing *mutual reachability*
  ``max(d(a, b), core(a), core(b))`` (HDBSCAN's), a union-find that keeps each
  read's orientation relative to its cluster. At the top level (all links up to
  ``eps``) the components are DBSCAN's clusters at ``eps``.
* **Split** (``min_cluster_size``): the order of links is a hierarchy; HDBSCAN's
  condensed tree and excess-of-mass selection keep a component whole, or split it
  into the sub-clusters of at least ``min_cluster_size`` reads that persist over
  a wider range of densities than the component does. Two strands joined
  through a few bridging reads (a chimera; reads that share primers and little
  else) are two dense groups linked only at the bridge's larger distance: they
  come apart. Reads of one strand, each with its own independent errors, peel
  off one at a time as the radius shrinks; that never forms two sub-clusters, so
  a strand is not split. ``min_cluster_size=None``: no split (plain DBSCAN).
* **Border reads** (non-core, within ``eps`` of a core read) join the cluster of
  their nearest core read, as in DBSCAN. Reads that fall out of a component
  before it splits (the loosest ones, the bridges among them) and reads with no
  core read within ``eps`` are noise.

Stability of a condensed cluster C (Campello et al. 2013): the sum over its reads
of ``lambda_p - lambda_birth(C)``, with ``lambda = 1 / distance``, ``lambda_p``
the level at which read p leaves C. A component is born at ``eps``. The tree is
built bottom-up while linking (one pass over the links in order), so the cost is
that of sorting the links.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from dnaembed.cluster.candidates import CandidatePairs
from dnaembed.cluster.unionfind import ParityUnionFind


def core_distances(n: int, lo: np.ndarray, hi: np.ndarray, dist: np.ndarray,
                   weights: np.ndarray, min_samples: int) -> np.ndarray:
    """Each read's core distance (``inf``: not a core read), from its verified pairs."""
    w = np.asarray(weights, dtype=np.float64)
    core = np.where(w >= min_samples, 0.0, np.inf)
    src = np.concatenate([lo, hi])
    dst = np.concatenate([hi, lo])
    d = np.concatenate([dist, dist]).astype(np.float64)
    order = np.lexsort((dst, d, src))
    src, dst, d = src[order], dst[order], d[order]
    cum = np.cumsum(w[dst])
    first = np.ones(len(src), dtype=bool)
    first[1:] = src[1:] != src[:-1]
    start = np.maximum.accumulate(np.where(first, np.arange(len(src)), 0))
    before = cum[start] - w[dst[start]]  # weight of the pairs ahead of each group
    reached = (w[src] + cum - before >= min_samples) & ~np.isfinite(core[src])
    hit_src, hit_at = np.unique(src[reached], return_index=True)
    core[hit_src] = d[reached][hit_at]
    return core


@dataclass
class _Condensed:
    """The condensed tree, grown bottom-up: per cluster, its sum of levels, mass, children."""

    lam_sum: list[float] = field(default_factory=list)
    mass: list[float] = field(default_factory=list)
    birth: list[float] = field(default_factory=list)
    children: list[tuple[int, int] | None] = field(default_factory=list)

    def new(self, lam_sum: float, children: tuple[int, int] | None = None) -> int:
        self.lam_sum.append(lam_sum)
        self.mass.append(0.0)
        self.birth.append(0.0)
        self.children.append(children)
        return len(self.lam_sum) - 1

    def close(self, c: int, mass: float, birth: float) -> None:
        self.mass[c], self.birth[c] = mass, birth

    def selected(self) -> np.ndarray:
        """Excess-of-mass selection: per cluster, the selected cluster above or at it (or -1)."""
        n = len(self.lam_sum)
        stability = np.array(self.lam_sum) - np.array(self.mass) * np.array(self.birth)
        best = np.zeros(n)
        keep = np.zeros(n, dtype=bool)
        parent = np.full(n, -1, dtype=np.int64)
        for c in range(n):  # children are created before their parents
            kids = self.children[c]
            below = best[kids[0]] + best[kids[1]] if kids else -np.inf
            if kids:
                parent[list(kids)] = c
            keep[c] = stability[c] >= below
            best[c] = max(stability[c], below)
        chosen = np.full(n, -1, dtype=np.int64)
        for c in range(n - 1, -1, -1):  # parents first: the first kept cluster from the top
            above = chosen[parent[c]] if parent[c] >= 0 else -1
            chosen[c] = above if above >= 0 else (c if keep[c] else -1)
        return chosen


@dataclass
class DensityClusters:
    """A group per read (noise reads: each its own), parity relative to the group, counts."""

    groups: np.ndarray  # int64
    parity: np.ndarray  # int8
    noise: np.ndarray  # bool: core reads that fell out before a split, and lone non-core reads
    splits: int  # components split into more than one cluster


def density_clusters(n: int, edges: CandidatePairs, dist: np.ndarray, core: np.ndarray,
                     weights: np.ndarray, *, eps: float,
                     min_cluster_size: int | None) -> DensityClusters:
    """Link core reads, split the components, attach border reads (see the module notes)."""
    is_core = np.isfinite(core)
    both = is_core[edges.lo] & is_core[edges.hi]
    links = edges.subset(both)
    reach = np.maximum(dist[both], np.maximum(core[links.lo], core[links.hi]))
    linker = _Linker(n, weights, min_cluster_size)
    linker.link(links, reach)
    roots, parity = linker.uf.labels()
    groups = roots.copy()
    noise = np.zeros(n, dtype=bool)
    splits = 0
    if min_cluster_size is not None:
        # Components are born at eps (or at their loosest link, where a cut scaled to a long
        # read's length lets a link exceed eps).
        birth = 1.0 / (1.0 + max(eps, float(reach.max(initial=eps))))
        for r in np.unique(roots).tolist():
            if linker.cl[r] >= 0:
                linker.tree.close(linker.cl[r], linker.mass[r], birth)
        chosen = linker.tree.selected()
        in_tree = linker.leaf >= 0
        label = np.full(n, -1, dtype=np.int64)
        label[in_tree] = chosen[linker.leaf[in_tree]]
        noise = in_tree & (label < 0)
        kept = in_tree & ~noise
        groups[kept] = n + label[kept]
        top_of = np.unique(np.stack([roots[kept], label[kept]]), axis=1)[0]
        splits = int(np.sum(np.bincount(np.unique(top_of, return_inverse=True)[1]) > 1))
    attached = _attach_border(edges, dist, is_core & ~noise, ~is_core, groups, parity)
    noise |= ~is_core
    noise[attached] = False
    return DensityClusters(groups, parity.astype(np.int8), noise, splits)


def _attach_border(edges: CandidatePairs, dist: np.ndarray, anchor: np.ndarray,
                   border: np.ndarray, groups: np.ndarray, parity: np.ndarray) -> np.ndarray:
    """Border reads join the group of their nearest anchor read (ties: the lower index).

    Returns the reads that joined one."""
    src = np.concatenate([edges.lo, edges.hi])
    dst = np.concatenate([edges.hi, edges.lo])
    d = np.concatenate([dist, dist])
    p = np.concatenate([edges.parity, edges.parity])
    ok = border[src] & anchor[dst]
    src, dst, d, p = src[ok], dst[ok], d[ok], p[ok]
    order = np.lexsort((dst, d, src))
    src, dst, p = src[order], dst[order], p[order]
    reads, first = np.unique(src, return_index=True)
    groups[reads] = groups[dst[first]]
    parity[reads] = parity[dst[first]] ^ p[first]
    return reads


class _Linker:
    """Kruskal order over the links, with the condensed tree grown as components join."""

    def __init__(self, n: int, weights: np.ndarray, min_cluster_size: int | None) -> None:
        self.uf = ParityUnionFind(n)
        self.mass = np.asarray(weights, dtype=np.float64).tolist()
        self.track = min_cluster_size is not None
        self.min_size = float(min_cluster_size or 0)
        self.cl = [-1] * n  # per root: its condensed cluster, once it weighs min_cluster_size
        self.members: dict[int, list[int]] = {}  # per root of a lighter component
        self.leaf = np.full(n, -1, dtype=np.int64)  # the condensed cluster a read leaves from
        self.tree = _Condensed()

    def link(self, links: CandidatePairs, reach: np.ndarray) -> None:
        order = np.lexsort((links.hi, links.lo, reach))
        uf, mass = self.uf, self.mass
        for i, j, p, m in zip(links.lo[order].tolist(), links.hi[order].tolist(),
                              links.parity[order].tolist(), reach[order].tolist()):
            ri, pi = uf.find(i)
            rj, pj = uf.find(j)
            if ri == rj:
                continue
            root = uf.union_roots(ri, rj, pi ^ p ^ pj)
            if self.track:
                self._grow(ri, rj, root, 1.0 / (1.0 + m))
            mass[root] = mass[ri] + mass[rj]

    def _grow(self, ri: int, rj: int, root: int, lam: float) -> None:
        """The condensed tree's step for one join (see the module notes)."""
        ca, cb, ma, mb, tree = self.cl[ri], self.cl[rj], self.mass[ri], self.mass[rj], self.tree
        if ca >= 0 and cb >= 0:  # two clusters: top-down, their parent splits here
            tree.close(ca, ma, lam)
            tree.close(cb, mb, lam)
            self.cl[root] = tree.new((ma + mb) * lam, (ca, cb))
        elif ca >= 0 or cb >= 0:  # a lighter component falls out of a cluster here
            big, light, light_mass = (ca, rj, mb) if ca >= 0 else (cb, ri, ma)
            tree.lam_sum[big] += light_mass * lam
            self.leaf[self.members.pop(light, [light])] = big
            self.cl[root] = big
        else:
            joined = self.members.pop(ri, [ri]) + self.members.pop(rj, [rj])
            if ma + mb >= self.min_size:
                c = tree.new((ma + mb) * lam)
                self.leaf[joined] = c
                self.cl[root] = c
            else:
                self.members[root] = joined
