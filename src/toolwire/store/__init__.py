"""The DuckDB store: every spec, pack, run, attempt, tool call and operation, for SQL.

``Store`` is the only writer; ``schema.MIGRATIONS`` holds the DDL; ``views`` the
analysis views (``run_summary``, ``tool_stats``, ``repair_stats``).
"""

from __future__ import annotations

from toolwire.store.schema import LATEST_VERSION, MIGRATIONS
from toolwire.store.store import Store

__all__ = ["LATEST_VERSION", "MIGRATIONS", "Store"]
