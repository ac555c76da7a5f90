"""Union-find that also tracks each element's orientation relative to its set.

Reads come off the sequencer in either orientation. Linking read ``i`` to read
``j`` with parity ``p`` says "``j`` read as is (p = 0) or reverse-complemented
(p = 1) matches ``i``". The structure keeps, for every element, its parity
relative to the root of its set, so a whole cluster can be brought to one
orientation at the end.

The per-element state is kept in typed arrays (``array.array``) rather than
lists: 9 bytes per element instead of ~80 (a list holds a pointer and an int
object per entry), as fast to index, which matters at millions of reads.
"""

from __future__ import annotations

from array import array
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import numpy.typing as npt


class ParityUnionFind:
    """Disjoint sets over ``0..n-1`` with a parity bit per element relative to its root."""

    def __init__(self, n: int) -> None:
        self.parent = array("i", range(n))
        self.parity = array("b", bytes(n))  # relative to parent
        self.size = array("i", [1]) * n

    def find(self, x: int) -> tuple[int, int]:
        """``(root, parity of x relative to root)``, compressing the path."""
        parent, parity = self.parent, self.parity
        path = []
        while parent[x] != x:
            path.append(x)
            x = parent[x]
        root = x
        # Walk back from the node nearest the root, accumulating parities.
        acc = 0
        for node in reversed(path):
            acc ^= parity[node]
            parity[node] = acc
            parent[node] = root
        return root, (parity[path[0]] if path else 0)

    def union_roots(self, ra: int, rb: int, parity: int) -> int:
        """Join two roots; ``parity`` is rb's orientation relative to ra. Returns the new root."""
        if self.size[ra] < self.size[rb]:
            ra, rb = rb, ra  # parity is symmetric
        self.parent[rb] = ra
        self.parity[rb] = parity
        self.size[ra] += self.size[rb]
        return ra

    def roots(self, x: np.ndarray) -> np.ndarray:
        """The root of each element of ``x``, for many at once (no path is compressed)."""
        parent = np.frombuffer(self.parent, dtype=np.int32)
        root = parent[x]
        while True:
            up = parent[root]
            if np.array_equal(up, root):
                return root
            root = up

    def labels(self, dtype: npt.DTypeLike = np.int64) -> tuple[np.ndarray, np.ndarray]:
        """Root of every element (of ``dtype``; int32 halves the temporaries) and its
        parity relative to that root.

        By pointer jumping over the whole array (each step halves every path and folds
        the parities along it), not :meth:`find` element by element, which cost about a
        second per 10^6 reads each time the labels were asked for.
        """
        parent = np.frombuffer(self.parent, dtype=np.int32).astype(dtype)
        parity = np.frombuffer(self.parity, dtype=np.int8).copy()  # roots' entries are 0
        while True:
            grand = parent[parent]
            if np.array_equal(grand, parent):
                return parent, parity
            parity ^= parity[parent]
            parent = grand
