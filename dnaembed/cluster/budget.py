"""How partitioned clustering splits its work to fit a memory budget per process.

The budget (``--memory``) is what each process may hold: this one (which
reads the input, keeps the per-read state, links and rescues), and each
worker (which embeds chunks and searches partitions). The work is split by
figures measured on this code (``scripts/bench_scale.py``, docs/scaling.md):

* a process with the model loaded holds :data:`PROCESS_BASE` before any read;
  the rest of the budget is the room the data may take;
* the reads (ids, then sequences at two bits per base) stay in memory up to
  :data:`READS_SHARE` of the room, or what the tasks and the vectors leave of
  :data:`DATA_SHARE` if that is more, and go to files under the tmpdir beyond it; the
  search vectors (float16) likewise at :data:`VECTORS_SHARE`, and spilled ones stay
  resident while round 1 reads them, up to :data:`ROUND1_RESIDENT_PER_READ`;
* a task holds about :data:`TASK_BYTES_PER_READ` per read of its chunk or
  partition; the tasks a process runs at once share :data:`TASK_SHARE` of
  the room, which bounds the chunk size (the partition size is the user's:
  a budget too small for it is refused, so that the budget never changes the
  output);
* what every read costs this process whatever is spilled (hashes, labels, the
  union-find, the pairs while they are linked: :data:`CLIENT_BYTES_PER_READ`)
  cannot be split: a budget below it is refused before the work starts; so are the
  cells' distances to one another (:data:`CELL_PAIR_BYTES` per pair of cells), which
  grow with the square of the cells.

Without a budget nothing is spilled and the sizes are the defaults. Neither
spilling nor the chunk size changes the output.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, NoReturn

from dnaembed.cluster.partitioned import PartitionPlan
from dnaembed.errors import DnaembedError

if TYPE_CHECKING:
    from dnaembed.execute import Runner
    from dnaembed.model.encoder import Encoder

MB = 1 << 20
#: Resident memory of a process with torch, faiss and a model loaded, before any data.
PROCESS_BASE = 320 * MB
READS_SHARE = 0.25
VECTORS_SHARE = 0.15
TASK_SHARE = 0.5
#: Of the room, what the data may take in all (the rest is a margin).
DATA_SHARE = READS_SHARE + VECTORS_SHARE + TASK_SHARE
#: Per read of a task (vectors as float32, sequences as strings, neighbours, pairs).
TASK_BYTES_PER_READ = 2_000
#: Per distinct read, in this process, whatever is spilled: measured 485 bytes (3 x 10^6
#: reads under --memory 2G peaked at 1,783 MiB with 74 MB of reads in memory,
#: docs/scaling.md), so that a budget too small for the client's state is refused before
#: the work instead of exceeded.
CLIENT_BYTES_PER_READ = 520
#: Of those, what round 1 does not hold yet: the pairs as the link after it holds them.
#: So round 1 may keep this much of the spilled vectors' pages resident per read (64
#: dimensions: 128 bytes a read, all of them), instead of faulting them in again for
#: every partition. 3 x 10^6 reads under --memory 2G: 1,200-1,270 MiB resident during
#: round 1 and 1,860-1,899 MiB at the link with the pages given back after every
#: partition; 1,556-1,635 and 1,884-1,895 MiB with the vectors' 366 MB resident.
ROUND1_RESIDENT_PER_READ = 150
#: Smallest partition and chunk a budget may force.
MIN_TASK_READS = 256
#: Per pair of round 1's cells: what assigning reads to cells keeps of them in every
#: process that assigns (:class:`~dnaembed.cluster.partition._CellGeometry`: the
#: centroids' distances in float64 and the screen's reach in float32, 12 bytes), and a
#: later round's, no more cells than round 1's, as it is made (20 bytes: a float64
#: temporary too). Measured: 713 MB resident and a peak 1,213 MB above the process for
#: 7,813 cells (2 x 10^6 reads in cells of 256). It grows with the square of the cells:
#: 16 MB at 3 x 10^6 reads in cells of 4,096 (733), 182 MB at 10^7, 18 GB at 10^8.
CELL_PAIR_BYTES = 12 + 20


@dataclass
class WorkPlan:
    """The split: the partition plan, the reads kept in memory, and why."""

    plan: PartitionPlan
    reads_in_memory: int | None
    memory: int | None
    units: int = 0
    tasks_here: int = 1

    def describe(self) -> str:
        """The plan for the log: the budget, where the reads and vectors are kept, and the
        sizes of chunks and partitions."""
        p = self.plan
        vectors = self.units * p.search_dim * 2
        head = ("no memory budget" if self.memory is None else
                f"memory budget {self.memory / MB:,.0f} MB per process ({self.tasks_here} "
                f"task{'s' if self.tasks_here != 1 else ''} at a time here)")
        if self.reads_in_memory is None:
            reads = "reads in memory"
        else:
            reads = (f"reads in memory up to {self.reads_in_memory / MB:,.0f} MB (the sequences "
                     "at two bits per base), then spilled to the tmpdir")
        where = "in memory"
        if p.spill_vectors and p.resident_vectors >= vectors:
            where = "spilled to the tmpdir (held in memory in round 1)"
        elif p.spill_vectors:
            where = (f"spilled to the tmpdir (up to {p.resident_vectors / MB:,.1f} MB of them "
                     "resident in round 1)")
        return (f"{head}: {reads}; search vectors {vectors / MB:,.1f} MB (float16) {where}; "
                f"embedding in chunks of {p.chunk_size:,} reads; partitions of about "
                f"{p.partition_size:,} reads")


def plan_work(memory: int | None, runner: Runner | TaskSlots | None, *, units: int = 0,
              model: Encoder | None = None, params: dict | None = None) -> WorkPlan:
    """The work plan for ``units`` distinct reads under ``memory`` bytes per process.

    ``params``: :class:`PartitionPlan` fields, and ``reads_in_memory`` (bytes of
    reads kept in memory before they are spilled; 0: spill them all).
    """
    params = params or {}
    names = {f.name for f in fields(PartitionPlan)}
    plan = PartitionPlan(**{k: v for k, v in params.items() if k in names and v is not None})
    if model is not None and not 0 < plan.search_dim < model.config.embedding_dim:
        plan.search_dim = model.config.embedding_dim
    # Tasks at once in one process: the in-process executor's threads, or a worker's.
    tasks_here = max(1, int(getattr(runner, "tasks_per_process", 1)))
    reads_in_memory = params.get("reads_in_memory")
    if memory is None:
        return WorkPlan(plan, reads_in_memory, None, units, tasks_here)
    cells = -(-units // plan.partition_size)
    geometry = CELL_PAIR_BYTES * cells * cells
    room = memory - PROCESS_BASE - CLIENT_BYTES_PER_READ * units - geometry
    tasks = tasks_here * TASK_BYTES_PER_READ * MIN_TASK_READS
    partitions = tasks_here * TASK_BYTES_PER_READ * plan.partition_size
    if room < max(tasks, partitions / TASK_SHARE):
        _refuse(memory, memory - room + partitions / TASK_SHARE, units, plan.partition_size,
                tasks_here, cells, geometry)
    task_reads = max(MIN_TASK_READS, int(TASK_SHARE * room / (tasks_here * TASK_BYTES_PER_READ)))
    plan.chunk_size = min(plan.chunk_size, task_reads)
    plan.spill_vectors = plan.spill_vectors or units * plan.search_dim * 2 > VECTORS_SHARE * room
    plan.resident_vectors = ROUND1_RESIDENT_PER_READ * units
    if reads_in_memory is None:
        reads_in_memory = _reads_room(plan, room, units, tasks_here)
    return WorkPlan(plan, reads_in_memory, memory, units, tasks_here)


@dataclass(frozen=True)
class TaskSlots:
    """Tasks one process runs at once, where no executor exists yet to say so (what
    :func:`plan_work` reads of one)."""

    tasks_per_process: int


def refuse_unfit(memory: int | None, tasks_per_process: int,
                 params: dict | None = None) -> None:
    """:func:`plan_work`'s refusal of a budget too small for the tasks before any read is
    counted, for processes that run ``tasks_per_process`` tasks at once. Why: a
    LocalCluster is started before the work is planned, so a run under ``--memory 1M``
    started one, and logged its empty summary, before it was refused."""
    plan_work(memory, TaskSlots(tasks_per_process), params=params)


def _reads_room(plan: PartitionPlan, room: int, units: int, tasks_here: int) -> int:
    """Bytes of reads kept in memory: their share of the room, or, once the reads are
    counted, what the tasks (at the chunk or partition size, the larger) and the
    vectors held in memory leave of the data's share, if that is more. Why: with the
    chunks at their default size the tasks' share is not all taken; at 3 x 10^6 reads
    under ``--memory 2G`` what is left holds the sequences at two bits per base."""
    share = int(READS_SHARE * max(room, 0))
    if units == 0:  # still streaming: the per-read state is not counted yet
        return share
    tasks = tasks_here * TASK_BYTES_PER_READ * max(plan.chunk_size, plan.partition_size)
    vectors = 0 if plan.spill_vectors else units * plan.search_dim * 2
    return max(share, int(DATA_SHARE * room) - tasks - vectors)


def _megabytes(size: int) -> str:
    """``size`` for a message: in MB, or in bytes below one (a budget of "1K" read "0 MB")."""
    return f"{size / MB:,.0f} MB" if size >= MB else f"{size:,} bytes"


def _refuse(memory: int, needed: float, units: int, partition_size: int, tasks_here: int,
            cells: int, geometry: int) -> NoReturn:
    """The one-line error of a budget too small for the work (checked before the reads
    too, with ``units`` 0, when their number is not known yet); ``geometry``: the bytes
    of the ``cells``' distances to one another."""
    what = (f"{units:,} distinct reads and " if units else "") + (
        f"partitions of {partition_size:,} reads ({tasks_here} at a time)")
    between = (f", {geometry / MB:,.0f} MB for the distances between the {cells:,} cells"
               if geometry >= MB else "")
    # Fewer, larger cells shrink the cells' distances; smaller ones, the tasks.
    advice = "raise --partition-size" if geometry > needed / 2 else "lower --partition-size"
    raise DnaembedError(
        f"--memory {_megabytes(memory)} is too small for {what}: about {needed / MB:,.0f} MB "
        f"are needed ({PROCESS_BASE / MB:.0f} MB for the program and the model, "
        f"{CLIENT_BYTES_PER_READ} bytes per read{between}); {advice} or raise --memory")
