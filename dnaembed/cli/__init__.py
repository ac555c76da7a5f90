"""The ``dnaembed`` command line: a thin layer over the library functions.

One module per command; each registers itself on the group in :mod:`.base`.
"""

from dnaembed.cli import (  # noqa: F401  (register the commands)
    cluster,
    consensus,
    demo,
    embed,
    evaluate,
    report,
    run,
    simulate,
    train,
)
from dnaembed.cli.base import cli, main

__all__ = ["cli", "main"]
