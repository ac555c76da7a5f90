"""Errors that are the user's to fix; the CLI reports them as one line and exits 1 (2 for
usage errors)."""


class DnaembedError(Exception):
    """An error caused by input, options or environment, reported without a traceback."""


class InputError(DnaembedError):
    """A problem with an input file: the message names the file, the record and the problem."""


class UsageError(DnaembedError):
    """A problem with the user's settings (options, config values): the CLI exits 2."""
