#!/usr/bin/env python
"""CPU an idle Dask LocalCluster of two workers takes, with Dask's settings and with ours.

A LocalCluster's scheduler and nannies live in the client's process, which shares the
cores with the tasks; whatever they spend while the tasks run is taken from them. For each
configuration this starts a LocalCluster (2 workers, 1 thread each, on 127.0.0.1), waits a
few seconds, then measures the CPU time (user and system) of this process and of the
workers over --seconds of idling:

* "Dask's defaults": only the profiler off (as before any of ours);
* "dnaembed": ``dnaembed.execute.dask.LOCAL_WORKER_CONFIG``.

    python scripts/bench_idle_cluster.py --write-docs
"""

from __future__ import annotations

import argparse
import logging
import time

from benchlib import add_write_docs, finish


def idle_cpu(config: dict, seconds: float) -> tuple[float, float]:
    """(client process, workers) CPU seconds over ``seconds`` of an idle cluster."""
    import dask
    from distributed import Client, LocalCluster

    with dask.config.set(config):
        cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                               host="127.0.0.1", dashboard_address=None,
                               silence_logs=logging.WARNING)
    client = Client(cluster)
    try:
        time.sleep(3)  # past the start
        client0, workers0 = time.process_time(), sum(client.run(time.process_time).values())
        time.sleep(seconds)
        client1, workers1 = time.process_time(), sum(client.run(time.process_time).values())
    finally:
        client.close()
        cluster.close()
    return client1 - client0, workers1 - workers0


def main() -> None:
    from dnaembed.execute.dask import LOCAL_WORKER_CONFIG

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seconds", type=float, default=60.0)
    add_write_docs(p, "An idle LocalCluster of two workers: CPU a minute")
    args = p.parse_args()
    configs = {"Dask's defaults (profiler off)": {"distributed.worker.profile.enabled": False},
               "dnaembed (LOCAL_WORKER_CONFIG)": LOCAL_WORKER_CONFIG}
    lines = ["| settings | client process s/min | workers s/min |", "|---|---:|---:|"]
    for name, config in configs.items():
        client, workers = idle_cpu(config, args.seconds)
        scale = 60.0 / args.seconds
        lines.append(f"| {name} | {client * scale:.2f} | {workers * scale:.2f} |")
        print(lines[-1], flush=True)
    finish(args.write_docs, "\n".join(lines))


if __name__ == "__main__":
    main()
