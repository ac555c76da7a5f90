"""Benchmark tooling for ``scripts/benchmark_peers.py``: data sets, peers, runs, reports.

Kept out of the ``dnaembed`` package on purpose: it drives other programs
(vsearch, CD-HIT-EST, MMseqs2, Clover, Starcode) and is not part of the toolkit.

* :mod:`.convert`: every peer's output format -> ``read_id -> cluster_id``;
* :mod:`.measure`: run a command under ``/usr/bin/time -v`` with a time limit;
* :mod:`.datasets`: the simulated and real data sets, and each tool's input file;
* :mod:`.tools`: the peers, how each is run, with which settings and why;
* :mod:`.setup`: installing the peers (``--setup``);
* :mod:`.report`: Markdown tables and the JSON record.
"""
