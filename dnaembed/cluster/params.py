"""Hyper-parameter constraints, declared once per estimator and checked in ``fit``.

In the way of scikit-learn's ``_parameter_constraints``: each estimator class
maps every ``__init__`` parameter to the values it accepts (an
:class:`Interval`, an :class:`Options` set, ``"boolean"`` or ``None``), and
:func:`validate_params` checks them at the door of ``fit``, so the algorithms
never re-check their settings. The command line derives its option types from
the same declarations (:func:`dnaembed.cli.base.constrained`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from dnaembed.errors import DnaembedError


@dataclass(frozen=True)
class Interval:
    """Integers (``integer=True``) or real numbers between ``low`` and ``high`` (None: open).

    ``closed``: which ends belong to the interval: 'both', 'left', 'right' or 'neither'.
    """

    integer: bool
    low: float | None = None
    high: float | None = None
    closed: str = "both"

    def accepts(self, value: object) -> bool:
        """Whether ``value`` is a number of the kind, within the bounds (not a bool, nor
        nan)."""
        if isinstance(value, bool | np.bool_):
            return False
        kinds = (int, np.integer) if self.integer else (int, float, np.integer, np.floating)
        if not isinstance(value, kinds) or (not self.integer and math.isnan(float(value))):
            return False
        left = self.closed in ("both", "left")
        right = self.closed in ("both", "right")
        if self.low is not None and (value < self.low or (value == self.low and not left)):
            return False
        return not (self.high is not None and (value > self.high
                                               or (value == self.high and not right)))

    def describe(self) -> str:
        """The interval in words, for an error ("an integer >= 1")."""
        kind = "an integer" if self.integer else "a number"
        bounds = []
        if self.low is not None:
            bounds.append(f"{'>=' if self.closed in ('both', 'left') else '>'} {self.low:g}")
        if self.high is not None:
            bounds.append(f"{'<=' if self.closed in ('both', 'right') else '<'} {self.high:g}")
        return kind + (" " + " and ".join(bounds) if bounds else "")


@dataclass(frozen=True)
class Options:
    """One of a fixed set of values."""

    values: tuple

    def accepts(self, value: object) -> bool:
        """Whether ``value`` is one of the values."""
        return value in self.values

    def describe(self) -> str:
        """The values in words, for an error ("one of 'a', 'b'")."""
        return "one of " + ", ".join(repr(v) for v in self.values)


def _accepts(constraint: object, value: object) -> bool:
    if constraint is None:
        return value is None
    if constraint == "boolean":
        return isinstance(value, bool | np.bool_)
    return constraint.accepts(value)


def _describe(constraint: object) -> str:
    if constraint is None:
        return "None"
    if constraint == "boolean":
        return "True or False"
    return constraint.describe()


def validate_params(owner: object, constraints: dict[str, list]) -> None:
    """Raise :class:`DnaembedError` naming the first parameter of ``owner`` out of bounds."""
    for name, allowed in constraints.items():
        value = getattr(owner, name)
        if not any(_accepts(c, value) for c in allowed):
            wanted = " or ".join(_describe(c) for c in allowed)
            raise DnaembedError(f"{name} must be {wanted}, got {value!r}")
