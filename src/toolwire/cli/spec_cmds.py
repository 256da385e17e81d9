"""`toolwire spec …`: check, hash, diff specs and print their JSON Schema.

Output is plain text meant for editors and scripts: one ``file:line:col:
key.path: message`` line per problem on stderr, results on stdout. The spec
module is imported inside each command so ``toolwire --help`` stays fast.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

if TYPE_CHECKING:
    from toolwire.spec.model import LoadedSpec, ModelConfig

__all__ = ["app"]

app = typer.Typer(
    help="Validate, hash and compare agent specs (YAML).",
    no_args_is_help=True,
    add_completion=False,
    rich_markup_mode=None,
)


def _load(path: Path) -> LoadedSpec | None:
    """Load a spec, or print its problems on stderr and return None."""
    from toolwire.errors import SpecError
    from toolwire.spec.model import load_spec

    try:
        return load_spec(path)
    except SpecError as exc:
        for issue in exc.issues:
            typer.echo(str(issue), err=True)
        return None


def _show(value: Any) -> str:
    from toolwire.spec.model import MISSING

    if value is MISSING:
        return "(absent)"
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


@app.command("check")
def check(
    paths: Annotated[list[Path], typer.Argument(help="Spec files to validate.")],
    schema_only: Annotated[
        bool,
        typer.Option(
            "--schema-only",
            help="Keys and values only: skip the pack, replay script and schedule checks "
            "(for a spec read away from the files it names).",
        ),
    ] = False,
) -> None:
    """Validate specs: `ok  PATH  HASH12` per valid file; exit 1 if any is invalid.

    Beyond keys and values, checks what `run` and `serve` would reject: the prompt
    pack, a replay script, and the schedule (Prefect's own cron check, the workspace).
    """
    from toolwire.providers.tool_carriage import prompt_tools_note
    from toolwire.run.preflight import cron_never_fires, preflight_issues
    from toolwire.spec.paths import spec_reads_outside

    failed = False
    for path in paths:
        loaded = _load(path)
        issues = preflight_issues(loaded) if loaded is not None and not schema_only else []
        for issue in issues:
            typer.echo(str(issue), err=True)
        if loaded is None or issues:
            failed = True
        else:
            typer.echo(f"ok  {path}  {loaded.hash[:12]}")
            schedule = None if schema_only else loaded.spec.schedule
            never = schedule and cron_never_fires(schedule.cron, schedule.timezone)
            if never:  # valid for Prefect, yet no date matches: a job that silently never runs
                typer.echo(f"warning: {path}: schedule.cron: {never}", err=True)
            answer, window = (
                loaded.spec.model.max_tokens,
                loaded.spec.constraints.context_window_tokens,
            )
            if answer >= window:  # valid alone, together no room: an agent's tool outputs
                # were all dropped and the run still ended ok (safety round four)
                typer.echo(
                    f"warning: {path}: model.max_tokens {answer} is not below "
                    f"constraints.context_window_tokens {window}: the answer alone fills the "
                    "window (notes are cut, tool outputs dropped)",
                    err=True,
                )
            ignored = _ignored_model_fields(loaded.spec.model)
            if ignored:  # written in the spec, read by nobody: say so
                typer.echo(f"note: {path}: {ignored}", err=True)
            for tool in loaded.spec.code_tools:  # untrusted specs must not run code unnoticed
                typer.echo(
                    f"note: {path}: runs Python code: {tool} (only with "
                    "TOOLWIRE_ALLOW_PYTHON_TOOLS=1)",
                    err=True,
                )
            for read in [] if schema_only else spec_reads_outside(loaded):
                typer.echo(f"note: {path}: {read}", err=True)  # named, not refused (spec_paths)
            carriage = prompt_tools_note(loaded.spec.transport, loaded.spec.model)
            if carriage is not None:  # issue 32: no run may send a prompt without its tools
                typer.echo(f"note: {path}: {carriage}", err=True)
    raise typer.Exit(1 if failed else 0)


# Model fields only one kind of provider reads (README "Concepts"): set for another, they
# were silently ignored (safety round four). Kept for a --model override, so a note.
_PROVIDER_FIELDS = {
    "llamacpp": ("base_url", "server", "extra_body", "timeout_s"),
    "openai": ("n_threads",),
}


def _ignored_model_fields(model: ModelConfig) -> str | None:
    """A note naming the model fields the spec sets that its provider never reads."""
    given = model.model_fields_set
    fields = _PROVIDER_FIELDS.get(model.provider, ())
    unread = [f for f in fields if f in given and getattr(model, f) is not None]
    if not unread:
        return None
    named = ", ".join(f"model.{f}" for f in unread)
    return f"{named} {'is' if len(unread) == 1 else 'are'} not read by a {model.provider}: model"


@app.command("schema")
def schema() -> None:
    """Print the JSON Schema of a spec file (what specs/spec.schema.json holds)."""
    from toolwire.spec.model import spec_json_schema

    typer.echo(json.dumps(spec_json_schema(), indent=2, ensure_ascii=False))


@app.command("hash")
def hash_(path: Annotated[Path, typer.Argument(help="Spec file.")]) -> None:
    """Print the spec's canonical sha256 (independent of comments and layout)."""
    loaded = _load(path)
    if loaded is None:
        raise typer.Exit(1)
    typer.echo(loaded.hash)


@app.command("diff")
def diff(
    old: Annotated[Path, typer.Argument(help="The old spec file.")],
    new: Annotated[Path, typer.Argument(help="The new spec file.")],
) -> None:
    """Show which canonical values differ: `~ key: old -> new`, `+` added, `-` removed."""
    from toolwire.spec.model import MISSING, diff_specs

    before, after = _load(old), _load(new)
    if before is None or after is None:
        raise typer.Exit(1)
    typer.echo(f"old  {old}  {before.hash}")
    typer.echo(f"new  {new}  {after.hash}")
    changes = diff_specs(before, after)
    for key, a, b in changes:
        if a is MISSING:
            typer.echo(f"+ {key}: {_show(b)}")
        elif b is MISSING:
            typer.echo(f"- {key}: {_show(a)}")
        else:
            typer.echo(f"~ {key}: {_show(a)} -> {_show(b)}")
    if not changes:
        typer.echo("no changes")
