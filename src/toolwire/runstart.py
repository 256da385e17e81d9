"""What every job does before its first model call: find the workspace, record the run.

Shared by the librarian (`toolwire.librarian.job`) and tool agents
(`toolwire.agent.context`), so both write the same content-addressed spec and
pack rows and the same 'running' run row.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from toolwire.errors import UsageError

__all__ = ["resolve_workspace", "record_run_start"]


def resolve_workspace(
    workspace: str | Path | None, spec: Any, base_dir: Path, *, what: str
) -> Path:
    """``--workspace``, else the spec's ``schedule.workspace`` (relative to the spec file)."""
    if workspace is not None:
        return Path(workspace).resolve()
    if spec.schedule is not None and spec.schedule.workspace:
        return (base_dir / spec.schedule.workspace).resolve()
    raise UsageError(f"no workspace: pass --workspace DIR ({what})")


def record_run_start(ctx: Any, *, job: str, dry_run: bool, settings: dict[str, Any]) -> None:
    """Spec and pack (stored once per hash), then the run row with status 'running'.

    ``ctx`` has run_id, loaded, pack, model_cfg, transport, workspace_root,
    user_id, flow_run_id and store; ``settings`` lands in ``runs.settings_json``.
    """
    from toolwire.spec import canonical_json

    spec = ctx.loaded.spec
    ctx.store.record_spec(
        ctx.loaded.hash, spec.name, str(spec.version), ctx.loaded.text, canonical_json(spec)
    )
    ctx.store.record_pack(
        ctx.pack.pack_hash,
        json.dumps(ctx.pack.manifest, sort_keys=True),
        {name: (ctx.pack.file_hashes[name], data) for name, data in ctx.pack.files.items()},
    )
    provider_name, _, model_name = ctx.model_cfg.name.partition(":")
    ctx.store.start_run(
        {
            "run_id": ctx.run_id,
            "spec_hash": ctx.loaded.hash,
            "pack_hash": ctx.pack.pack_hash,
            "spec_name": spec.name,
            "job": job,
            "transport": ctx.transport,
            "provider": provider_name,
            "model": model_name,
            "workspace": str(ctx.workspace_root),
            "user_id": ctx.user_id,
            "flow_run_id": ctx.flow_run_id,
            "status": "running",
            "dry_run": dry_run,
            "turns": 0,
            "settings_json": json.dumps(
                {
                    "temperature": ctx.model_cfg.temperature,
                    "max_tokens": ctx.model_cfg.max_tokens,
                    "constrain": ctx.model_cfg.constrain,
                    **settings,
                },
                sort_keys=True,
            ),
        }
    )
