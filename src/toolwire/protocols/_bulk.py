"""Frozen dataclasses built in bulk, for the whole-text fast paths.

Building a frozen dataclass through its ``__init__`` costs ~0.5-1 us (one
``object.__setattr__`` per field): more than decoding a call's arguments. The
slot descriptors set the same fields from C inside ``map``; equality, hashing
and repr stay the dataclass's own. Only for classes with no ``__post_init__``
(nothing is checked or derived on construction).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from itertools import repeat
from typing import Any, TypeVar

from toolwire.domain import ToolCall

__all__ = ["build", "constructor", "tool_calls"]

T = TypeVar("T")
_NEW = object.__new__


def _setters(cls: type) -> tuple[Any, ...]:
    assert not hasattr(cls, "__post_init__"), cls
    return tuple(cls.__dict__[name].__set__ for name in cls.__slots__)  # type: ignore[attr-defined]


_SETTERS: dict[type, tuple[Any, ...]] = {}


def build(cls: type[T], count: int, columns: Sequence[Iterable[Any]]) -> list[T]:
    """``count`` instances of ``cls``; ``columns`` gives each field's values in slot order."""
    setters = _SETTERS.get(cls) or _SETTERS.setdefault(cls, _setters(cls))
    objects: list[T] = list(map(_NEW, repeat(cls, count)))
    for setter, values in zip(setters, columns, strict=True):
        list(map(setter, objects, values))
    return objects


def constructor(cls: type[T]) -> Callable[..., T]:
    """A function building ``cls`` from all its field values, in slot order.

    Straight-line code (generated, as ``dataclasses`` generates ``__init__``): a
    loop over the setters would cost what it saves.
    """
    setters = _setters(cls)
    names = [f"v{i}" for i in range(len(setters))]
    body = "".join(f"    s{i}(obj, {name})\n" for i, name in enumerate(names))
    source = f"def make({', '.join(names)}):\n    obj = new(cls)\n{body}    return obj\n"
    namespace: dict[str, Any] = {"new": _NEW, "cls": cls}
    namespace.update((f"s{i}", setter) for i, setter in enumerate(setters))
    exec(source, namespace)  # noqa: S102  (our own text: field positions only)
    make: Callable[..., T] = namespace["make"]
    return make


def tool_calls(
    ids: Sequence[str],
    tools: Iterable[str],
    args: Iterable[dict[str, Any]],
    source: str,
    slots: Iterable[str | None] | None = None,
) -> list[ToolCall]:
    """``ToolCall(id, tool, args, source, slot)`` for each position (slot None if not given)."""
    slot_column = repeat(None) if slots is None else slots
    return build(ToolCall, len(ids), (ids, tools, args, repeat(source), slot_column))
