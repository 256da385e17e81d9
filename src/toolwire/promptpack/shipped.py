"""The prompt packs installed with toolwire (``toolwire/prompt_packs/<name>/``), named by a
spec as ``prompt_pack: librarian-small`` (issue 42: a spec kept in the user's own
repository looked for ``prompt-packs/`` beside itself and failed ``spec check``)."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

__all__ = ["SHIPPED_PACKS", "pack_dir_of", "shipped_pack_names"]

SHIPPED_PACKS = Path(str(resources.files("toolwire").joinpath("prompt_packs"))).resolve()


def shipped_pack_names() -> list[str]:
    """The names of the packs installed with toolwire."""
    return sorted(p.name for p in SHIPPED_PACKS.iterdir() if (p / "manifest.json").is_file())


def pack_dir_of(base: Path, value: str) -> Path:
    """The folder a spec's ``prompt_pack`` names: a path relative to the spec's folder
    when one is there (a path always works), else a shipped pack of that name; a bare
    name with neither stays the path, so the error names where it looked."""
    local = (base / value).resolve()
    if local.exists() or "/" in value or value.startswith("."):
        return local
    shipped = SHIPPED_PACKS / value
    return shipped if (shipped / "manifest.json").is_file() else local
