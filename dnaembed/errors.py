"""Errors that are the user's to fix; the CLI reports them as one line and exits 1 (2 for usage)."""


class DnaembedError(Exception):
    """An error caused by input, options or environment, reported without a traceback."""


class InputError(DnaembedError):
    """A problem with an input file: the message names the file, the record and the problem."""


class UsageError(DnaembedError):
    """Options that cannot work together (an output that is an input, say): exit status 2."""
