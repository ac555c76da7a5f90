"""Config tables checked against a dataclass's annotated fields, before anything runs.

TOML values arrive untyped: ``steps = 2.5`` or ``steps = "five"`` would otherwise
surface as a TypeError deep inside training, after the run directory was made.
:func:`build` checks every value against its field's annotation (``int``,
``float``, ``str``, ``bool``, ``list[...]``, ``dict[str, ...]``, ``X | None``),
names the key and where the value came from (a file, a ``--set`` override, a
stage), and only then builds the dataclass, whose own checks (ranges, choices)
are reported with the same prefix. Every failure is a :class:`UsageError`.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from typing import Any, TypeVar

from dnaembed.errors import DnaembedError, UsageError

T = TypeVar("T")

_NAMES = {int: "an integer", float: "a number", str: "a string", bool: "true or false",
          dict: "a table"}


def _conform(value, hint) -> tuple[bool, object]:
    """``(True, value as the field holds it)`` when ``value`` fits ``hint``, else ``(False, _)``."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return True, None
        for arg in (a for a in args if a is not type(None)):
            ok, out = _conform(value, arg)
            if ok:
                return True, out
        return False, value
    if origin is list:
        if not isinstance(value, list):
            return False, value
        items = [_conform(v, args[0]) if args else (True, v) for v in value]
        return all(ok for ok, _ in items), [v for _, v in items]
    if origin is dict:
        if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
            return False, value
        items = {k: _conform(v, args[1]) if args else (True, v) for k, v in value.items()}
        return all(ok for ok, _ in items.values()), {k: v for k, (_, v) in items.items()}
    if hint is bool:
        return isinstance(value, bool), value
    if hint is dict:
        return isinstance(value, dict), value
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool), value
    if hint is float:
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        return ok, float(value) if ok else value
    if hint is str:
        return isinstance(value, str), value
    return True, value  # a field type this module does not know: its dataclass checks it


def describe(hint: object) -> str:
    """What a value of ``hint`` looks like, in words ("a list of integers")."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        return " or ".join(describe(a) for a in args if a is not type(None))
    if origin is list:
        inner = describe(args[0]) if args else "values"
        return "a list of " + inner.removeprefix("an ").removeprefix("a ") + "s"
    if origin is dict:
        return "a table of " + (describe(args[1]).removeprefix("a ") + "s" if args else "values")
    return _NAMES.get(hint, getattr(hint, "__name__", str(hint)))


def field_types(klass: type) -> dict[str, object]:
    """The resolved annotation of each dataclass field of ``klass``."""
    hints = typing.get_type_hints(klass)
    return {f.name: hints[f.name] for f in dataclasses.fields(klass)}


def checked(value: object, hint: object, key: str, where: str) -> Any:
    """``value`` as its field holds it, or a :class:`UsageError` naming ``where`` and ``key``."""
    ok, out = _conform(value, hint)
    if not ok:
        raise UsageError(f"{where}: {key}: expected {describe(hint)}, got {value!r}")
    return out


def build(klass: type[T], table: dict, section: str, origins: dict[str, str], default: str
          ) -> T:
    """``klass(**table)`` once every value has the type its field declares.

    ``origins`` maps ``section.key`` to where that value came from (file, override);
    ``default`` stands for keys it does not name. Unknown keys and the dataclass's own
    checks are reported with the origins of the table's values as the prefix.
    """
    types_ = field_types(klass)
    unknown = sorted(set(table) - set(types_))
    if unknown:
        where = _where(section, unknown, origins, default)
        raise UsageError(f"{where}: unknown [{section}] settings: {', '.join(unknown)}")
    values = {
        key: checked(value, types_[key], f"{section}.{key}",
                     origins.get(f"{section}.{key}", default))
        for key, value in table.items()
    }
    try:
        return klass(**values)
    except DnaembedError as e:
        raise UsageError(f"{_where(section, list(table), origins, default)}: {e}") from None


def _where(section: str, keys: list[str], origins: dict[str, str], default: str) -> str:
    """Every source that set one of ``keys``: ``"x.toml with --set train.steps=0"``."""
    seen = [origins.get(f"{section}.{k}", default) for k in keys] or [default]
    # Values set inside a table of the table (--set pairs.mix.unrelated=1) count too.
    prefixes = tuple(f"{section}.{k}." for k in keys)
    seen += [origin for key, origin in origins.items() if key.startswith(prefixes)]
    return " with ".join(dict.fromkeys(seen))
