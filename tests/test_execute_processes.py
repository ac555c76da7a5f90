"""Local worker processes (dnaembed.execute.processes), with real processes."""

from __future__ import annotations

import os

import pytest

from dnaembed.execute.processes import map_in_processes, start_method


class TaskFailed(Exception):
    """Raised by a task, to see it reach the caller as itself."""


def _square_and_pid(x: int) -> tuple[int, int]:
    return x * x, os.getpid()


def _fail_on_three(x: int) -> int:
    if x == 3:
        raise TaskFailed(f"task {x} cannot be done")
    return x


def test_results_in_task_order_whatever_the_processes():
    tasks = list(range(9, -1, -1))
    here = map_in_processes(_square_and_pid, tasks, processes=1)
    pool = map_in_processes(_square_and_pid, tasks, processes=2, weights=tasks, desc="squares")
    assert [r for r, _ in here] == [x * x for x in tasks]
    assert [r for r, _ in pool] == [r for r, _ in here]
    # One process runs here; two run in worker processes.
    assert {pid for _, pid in here} == {os.getpid()}
    assert os.getpid() not in {pid for _, pid in pool}


@pytest.mark.parametrize("processes", [1, 2])
def test_a_task_exception_reaches_the_caller_as_itself(processes):
    with pytest.raises(TaskFailed, match="task 3 cannot be done"):
        map_in_processes(_fail_on_three, [1, 2, 3, 4, 5], processes=processes)


def test_edge_cases():
    assert map_in_processes(_square_and_pid, [], processes=2) == []
    # One task runs here, however many processes are asked for; 0 means all cores.
    assert map_in_processes(_square_and_pid, [4], processes=0) == [(16, os.getpid())]
    with pytest.raises(ValueError, match="2 weights for 3 tasks"):
        map_in_processes(_square_and_pid, [1, 2, 3], weights=[1, 1])


def test_workers_are_spawned_once_torch_is_loaded():
    import torch  # noqa: F401  (its thread pool would break in a forked child)

    assert start_method() == "spawn"
