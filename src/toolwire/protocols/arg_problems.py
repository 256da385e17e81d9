"""The lines a model reads about a call's arguments, for the transports that check every
call against its tool's schema before any runs (``execute``, ``xct``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from toolwire.tools.args import check_args

__all__ = ["arg_problems"]


def arg_problems(
    args: dict[str, Any], schema: Mapping[str, Any], who: str
) -> list[tuple[str, str]]:
    """(detail code, line for the model) per problem ``tools.args.check_args`` finds."""
    lines = []
    for p in check_args(args, schema):
        if p.code == "MISSING_ARG":
            line = f"{who}: the required argument {p.arg!r} is missing: add it."
        else:
            arg = f" argument {p.arg!r}" if p.arg is not None else ""
            line = f"{who}{arg}: {p.message}."
        lines.append((p.detail, line))
    return lines
