"""Arrow row shapes for bulk inserts: each bulk-inserted table's column names and types
in one place, matching its DDL in ``store.schema`` (tests check them against it).

pyarrow (and numpy with it) is imported by each builder: only writes build Arrow
tables, and at module top it would slow every reader (`toolwire runs` 0.40 -> 0.47 s).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from toolwire.domain import OperationOutcome
from toolwire.errors import StoreError
from toolwire.store.schema import TOOL_CALL_COLUMNS
from toolwire.store.values import storable_text

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["note_change_rows", "operation_rows", "pack_file_rows", "tool_call_rows"]


def pack_file_rows(pack_hash: str, files: dict[str, tuple[str, bytes]]) -> pa.Table:
    import pyarrow as pa

    names = sorted(files)
    return pa.table(
        {
            "pack_hash": pa.array([pack_hash] * len(names), pa.string()),
            "name": pa.array(names, pa.string()),
            "sha256": pa.array([files[n][0] for n in names], pa.string()),
            "content": pa.array([bytes(files[n][1]) for n in names], pa.binary()),
        }
    )


def operation_rows(run_id: str, outcomes: list[OperationOutcome]) -> pa.Table:
    import pyarrow as pa

    ops = [o.operation for o in outcomes]
    return pa.table(
        {
            "run_id": pa.array([run_id] * len(outcomes), pa.string()),
            "turn": pa.array([o.turn for o in outcomes], pa.int32()),
            "seq": pa.array([o.seq for o in outcomes], pa.int32()),
            "operation_id": pa.array([op.operation_id for op in ops], pa.string()),
            "kind": pa.array([op.kind for op in ops], pa.string()),
            "target": pa.array([op.target or None for op in ops], pa.string()),
            "path": pa.array([o.path for o in outcomes], pa.string()),
            "title": pa.array([op.title for op in ops], pa.string()),
            "confidence": pa.array([op.confidence for op in ops], pa.float64()),
            "reason": pa.array([op.reason for op in ops], pa.string()),
            "status": pa.array([o.status for o in outcomes], pa.string()),
            "code": pa.array([o.code for o in outcomes], pa.string()),
            "detail": pa.array([o.detail for o in outcomes], pa.string()),
            "before_sha256": pa.array([o.before_sha256 for o in outcomes], pa.string()),
            "after_sha256": pa.array([o.after_sha256 for o in outcomes], pa.string()),
            "body_markdown": pa.array([op.body_markdown for op in ops], pa.string()),
        }
    )


_TOOL_CALL_TYPES = {"turn": "int32", "seq": "int32", "duration_ms": "float64"}
_TOOL_CALL_TYPES |= {"args_bytes": "int32", "result_bytes": "int32"}


def tool_call_rows(run_id: str, calls: list[dict[str, Any]]) -> pa.Table:
    """Tool-call dicts (keys = tool_calls columns minus run_id) -> Arrow; turn/seq required."""
    import pyarrow as pa

    allowed = set(TOOL_CALL_COLUMNS) - {"run_id"}
    for i, call in enumerate(calls):
        unknown = sorted(set(call) - allowed)
        if unknown:
            raise StoreError(f"tool_calls[{i}]: unknown columns {unknown}")
        if call.get("turn") is None or call.get("seq") is None:
            raise StoreError(f"tool_calls[{i}]: turn and seq are required")
    columns: dict[str, pa.Array] = {"run_id": pa.array([run_id] * len(calls), pa.string())}
    for name in TOOL_CALL_COLUMNS[1:]:
        arrow_type = pa.type_for_alias(_TOOL_CALL_TYPES.get(name, "string"))
        values = [call.get(name) for call in calls]
        try:
            columns[name] = pa.array(values, arrow_type)
        except UnicodeEncodeError:  # model text with a lone surrogate: keep it, escaped
            values = [storable_text(v) if isinstance(v, str) else v for v in values]
            columns[name] = pa.array(values, arrow_type)
    return pa.table(columns)


def note_change_rows(run_id: str, changes: Sequence[tuple[str, str, str, str]]) -> pa.Table:
    """``note_changes`` rows: (path, field, old, new) numbered in order."""
    import pyarrow as pa

    columns: list[list[str | None]] = [[], [], [], []]
    for row in changes:
        for column, value in zip(columns, row, strict=True):
            column.append(storable_text(value))
    return pa.table(
        {
            "run_id": pa.array([run_id] * len(changes), pa.string()),
            "seq": pa.array(range(len(changes)), pa.int32()),
            "path": pa.array(columns[0], pa.string()),
            "field": pa.array(columns[1], pa.string()),
            "old_value": pa.array(columns[2], pa.string()),
            "new_value": pa.array(columns[3], pa.string()),
        }
    )
