"""`toolwire pack check|hash`: validate a prompt pack and print its sha256."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from toolwire.cli import _output

if TYPE_CHECKING:
    from toolwire.promptpack.pack import PromptPack

__all__ = ["app"]

app = typer.Typer(help="Check and hash prompt packs.", no_args_is_help=True, rich_markup_mode=None)

PackDir = Annotated[Path, typer.Argument(help="Pack directory (holds manifest.json).")]


def _load_or_exit(dir: Path) -> PromptPack:
    """Load the pack, or print the one-line error and exit 1 (also outside `main`)."""
    from toolwire.errors import PackError
    from toolwire.promptpack.pack import load_pack

    try:
        return load_pack(dir)
    except PackError as exc:
        _output.error_line(exc)
        raise typer.Exit(1) from None


@app.command("check")
def check(
    dirs: Annotated[list[Path], typer.Argument(help="Pack folders (each holds manifest.json).")],
) -> None:
    """Validate packs: `ok DIR HASH12` and its stages per valid pack; exit 1 if any fails.

    Every pack is checked even after a failure, so one call reports them all.
    """
    from toolwire.errors import PackError
    from toolwire.promptpack.pack import load_pack

    failed = False
    for dir in dirs:
        try:
            pack = load_pack(dir)
        except PackError as exc:
            _output.error_line(exc)
            failed = True
            continue
        _print_pack(dir, pack)
    raise typer.Exit(1 if failed else 0)


def _print_pack(dir: Path, pack: PromptPack) -> None:
    _output.stdout.print(f"ok {dir} {pack.pack_hash[:12]}", markup=False)
    stage_files = pack.manifest["stages"]
    for name, stage in pack.stages.items():
        bindings = ", ".join(stage.input_bindings)
        _output.stdout.print(
            f"  {name:<16} {stage_files[name]:<24} {stage.output_format:<13} "
            f"{stage.model_profile}  bindings: {bindings}",
            markup=False,
        )


@app.command("hash")
def hash_(
    dir: PackDir,
    files: Annotated[
        bool, typer.Option("--files", help="Also print each included file's sha256.")
    ] = False,
) -> None:
    """Print the pack's sha256 (64 hex); with --files, `SHA256  NAME` per included file."""
    pack = _load_or_exit(dir)
    _output.stdout.print(pack.pack_hash, markup=False)
    if files:
        for name, digest in pack.file_hashes.items():
            _output.stdout.print(f"{digest}  {name}", markup=False)
