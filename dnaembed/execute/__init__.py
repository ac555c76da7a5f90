"""How work runs: in this process, in local worker processes, or on Dask."""
