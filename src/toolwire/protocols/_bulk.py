"""Frozen slotted dataclasses built fast, for the whole-text fast paths.

Building a frozen dataclass through its ``__init__`` costs ~0.5-1 us (one
``object.__setattr__`` per field): more than decoding a call's arguments.
Two cheaper ways, for classes with no ``__post_init__`` (nothing is checked
or derived on construction):

- ``twin(cls)``: the compiled ``_speedups.Maker`` (object.__new__ and the slot
  descriptors' setters, from C), or else a plain slotted class with the same
  slots in the same order (the same memory layout) whose generated ``__init__``
  stores the fields as ordinary slot writes and then turns the object into a
  ``cls`` instance (``__class__`` assignment, which Python allows between
  layout-compatible classes). The result is an ordinary ``cls`` instance: same type, equality,
  hashing, repr and immutability. ``map(twin, ...)`` builds many.
- ``build`` / ``constructor``: the slot descriptors' setters, from C inside
  ``map`` or from generated straight-line code.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from itertools import repeat
from typing import Any, TypeVar

from toolwire.domain import ToolCall

try:
    from toolwire.protocols._speedups import Maker
except ImportError:  # built at install when a C compiler is there
    Maker = None  # type: ignore[assignment,misc]

__all__ = ["build", "constructor", "tool_calls", "twin"]

T = TypeVar("T")
_NEW = object.__new__


def _fields(cls: type) -> tuple[str, ...]:
    assert not hasattr(cls, "__post_init__"), cls
    slots: tuple[str, ...] = tuple(cls.__dict__["__slots__"])
    assert "__dict__" not in slots and "__weakref__" not in slots, cls
    return slots


def _setters(cls: type) -> tuple[Any, ...]:
    return tuple(cls.__dict__[name].__set__ for name in _fields(cls))


_SETTERS: dict[type, tuple[Any, ...]] = {}
_TWINS: dict[tuple[type, bool], Callable[..., Any]] = {}


def twin(cls: type[T], *, compiled: bool | None = None) -> Callable[..., T]:
    """A callable building ``cls`` from all its field values in slot order (see above).

    ``compiled``: the C ``Maker`` (``_speedups``) or the Python twin class; None takes
    the C one when it was built.
    """
    if compiled is None:
        compiled = Maker is not None
    elif compiled and Maker is None:
        raise RuntimeError("toolwire.protocols._speedups was not built (no C compiler)")
    made = _TWINS.get((cls, compiled))
    if made is not None:
        return made
    if compiled:
        maker: Callable[..., T] = Maker(cls, tuple(cls.__dict__[f] for f in _fields(cls)))
        _TWINS[cls, True] = maker
        return maker
    fields = _fields(cls)
    params = ", ".join(f"f{i}" for i in range(len(fields)))
    body = "".join(f"    self.{name} = f{i}\n" for i, name in enumerate(fields))
    source = f"def __init__(self, {params}):\n{body}    self.__class__ = cls\n"
    namespace: dict[str, Any] = {"cls": cls}
    exec(source, namespace)  # noqa: S102  (our own text: the field names of a dataclass)
    made = type(
        f"_{cls.__name__}Twin",
        (),
        {"__slots__": fields, "__init__": namespace["__init__"], "__module__": __name__},
    )
    probe = made(*range(len(fields)))
    if type(probe) is not cls or [getattr(probe, f) for f in fields] != list(range(len(fields))):
        raise TypeError(f"{cls.__name__}: no layout-compatible twin")  # pragma: no cover
    _TWINS[cls, False] = made
    return made


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
    return list(map(twin(ToolCall), ids, tools, args, repeat(source), slot_column))
