"""What a command reports besides its results: the JSON summary and the plots.

* :mod:`.summary`: ``--json FILE``, plain data from the library's results;
* :mod:`.plots`: ``--plot DIR`` and ``dnaembed report``: PNGs drawn from that data
  (matplotlib, an optional extra) and from a training run's ``metrics.jsonl``.
"""
