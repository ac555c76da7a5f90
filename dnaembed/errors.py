"""Errors that are the user's to fix; the CLI reports them as one line and exits 1 (2 for usage)."""

from __future__ import annotations


class DnaembedError(Exception):
    """An error caused by input, options or environment, reported without a traceback."""


class InputError(DnaembedError):
    """A problem with an input file: the message names the file, the record and the problem."""


class UsageError(DnaembedError):
    """Options that cannot work together (an output that is an input, say): exit status 2."""


class SettingsConflict(UsageError):
    """Settings that cannot go together (a shared region longer than the strands, say).

    ``settings`` maps the name of each setting involved (a library parameter, such as
    ``shared_length``) to its value, and ``problem`` says what is wrong, so that a command
    can name its own options instead of the library's parameters (``--shared-region``).
    """

    def __init__(self, problem: str, settings: dict[str, object]) -> None:
        self.problem = problem
        self.settings = dict(settings)
        names = ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in self.settings.items())
        super().__init__(f"{problem} ({names})")

    def adding(self, **settings: object) -> SettingsConflict:
        """The same conflict, also naming ``settings`` (what the problem was measured against:
        the strand length, the reference file)."""
        return SettingsConflict(self.problem, {**self.settings, **settings})
