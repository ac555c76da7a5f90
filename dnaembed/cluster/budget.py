"""How partitioned clustering splits its work to fit a memory budget per process.

The budget (``--memory``) is what each process may hold: this one (which
reads the input, keeps the per-read state, links and rescues), and each
worker (which embeds chunks and searches partitions). The work is split by
figures measured on this code (``scripts/bench_scale.py``, docs/scaling.md):

* a process with the model loaded holds :data:`PROCESS_BASE` before any read;
* the reads (ids and sequences) stay in memory up to :data:`READS_SHARE` of
  the budget and go to files under the tmpdir beyond it; the search vectors
  (float16) likewise at :data:`VECTORS_SHARE`;
* a task holds about :data:`TASK_BYTES_PER_READ` per read of its chunk or
  partition; the tasks a process runs at once share :data:`TASK_SHARE` of
  what the budget leaves after the base, which bounds the partition size and
  the chunk size;
* what every read costs this process whatever is spilled (hashes, labels, the
  union-find, the pairs while they are linked: :data:`CLIENT_BYTES_PER_READ`)
  cannot be split: a budget below it is refused before the work starts.

Without a budget nothing is spilled and the sizes are the defaults. The
partition and chunk sizes change the output only when the budget forces them
below the defaults (the cells follow the partition size); spilling never does.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

from dnaembed.cluster.partitioned import PartitionPlan
from dnaembed.errors import DnaembedError

MB = 1 << 20
#: Resident memory of a process with torch, faiss and a model loaded, before any data.
PROCESS_BASE = 320 * MB
READS_SHARE = 0.25
VECTORS_SHARE = 0.15
TASK_SHARE = 0.5
#: Per read of a task (vectors as float32, sequences as strings, neighbours, pairs).
TASK_BYTES_PER_READ = 2_000
#: Per distinct read, in this process, whatever is spilled.
CLIENT_BYTES_PER_READ = 400
#: Smallest partition and chunk a budget may force.
MIN_TASK_READS = 256


@dataclass
class WorkPlan:
    """The split: the partition plan, the reads kept in memory, and why."""

    plan: PartitionPlan
    reads_in_memory: int | None
    memory: int | None
    units: int = 0
    tasks_here: int = 1

    def describe(self) -> str:
        p = self.plan
        vectors = self.units * p.search_dim * 2
        where = "spilled to the tmpdir" if p.spill_vectors else "in memory"
        text = (f"embedding in chunks of {p.chunk_size:,} reads; partitions of about "
                f"{p.partition_size:,} reads; search vectors {vectors / MB:,.0f} MB (float16) "
                f"{where}")
        if self.memory is None:
            return "no memory budget: " + text
        reads = (f"reads kept in memory up to {self.reads_in_memory / MB:,.0f} MB, spilled "
                 "beyond")
        return (f"memory budget {self.memory / MB:,.0f} MB per process "
                f"({self.tasks_here} task{'s' if self.tasks_here != 1 else ''} at a time "
                f"here): {reads}; {text}")


def plan_work(memory: int | None, runner, *, units: int = 0, model=None,
              params: dict | None = None) -> WorkPlan:
    """The work plan for ``units`` distinct reads under ``memory`` bytes per process."""
    params = params or {}
    names = {f.name for f in fields(PartitionPlan)}
    plan = PartitionPlan(**{k: v for k, v in params.items() if k in names and v is not None})
    if model is not None and not 0 < plan.search_dim < model.config.embedding_dim:
        plan.search_dim = model.config.embedding_dim
    # Tasks at once in one process: the in-process executor's threads, or a worker's.
    tasks_here = max(1, int(getattr(runner, "tasks_per_process", 1)))
    if memory is None:
        return WorkPlan(plan, None, None, units, tasks_here)
    room = memory - PROCESS_BASE
    needed = CLIENT_BYTES_PER_READ * units
    if room <= needed:
        raise DnaembedError(
            f"--memory {memory / MB:,.0f} MB is too small: {units:,} distinct reads need about "
            f"{(PROCESS_BASE + needed) / MB:,.0f} MB in this process ({PROCESS_BASE / MB:.0f} MB "
            f"for the program and the model, {CLIENT_BYTES_PER_READ} bytes per read)")
    task_reads = int(TASK_SHARE * (room - needed) / (tasks_here * TASK_BYTES_PER_READ))
    task_reads = max(MIN_TASK_READS, task_reads)
    plan.partition_size = min(plan.partition_size, task_reads)
    plan.chunk_size = min(plan.chunk_size, task_reads)
    plan.spill_vectors = units * plan.search_dim * 2 > VECTORS_SHARE * memory
    return WorkPlan(plan, int(READS_SHARE * memory), memory, units, tasks_here)
