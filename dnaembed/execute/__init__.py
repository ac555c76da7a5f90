"""How work runs: in this process, in local worker processes, or on Dask."""


def runs_here(runner) -> bool:
    """Whether ``runner``'s tasks would run on this interpreter's threads (None: no runner,
    everything here). Work that holds the interpreter lock gains nothing from such tasks, so
    it is done here in one pass instead: the same result, without packing it into tasks."""
    return runner is None or bool(getattr(runner, "shares_interpreter", False))
