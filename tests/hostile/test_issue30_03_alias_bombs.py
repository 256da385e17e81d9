"""Issue 30 item 3: a note's front matter cannot hang or exhaust a run.

Recursive aliases (``a: &a [*a]``, ``{b: *a}``, ``<<: *a``), alias bombs (nine
levels of nine aliases: 9^9 values from a few hundred bytes, as lists, as
mappings, through merge keys) and nesting deep enough to exhaust the parser are
refused by the note loader in linear time: the note is skipped with a warning,
every other note is read, the run ends ``ok``. The loader is first run in a
child process with a memory cap and a generous time bound, so the old code (which
walked the aliases forever, ~100 MB/s) fails this test instead of hanging it.
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from hostile.tally import Tally

REPO = Path(__file__).resolve().parents[2]
MEMORY_CAP = 1536 * 1024 * 1024
AREA = "issue 30: front matter bombs"


def _laughs(levels: int = 9, width: int = 9, *, mapping: bool = False, merge: bool = False) -> str:
    lines = ['l0: &l0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    for i in range(1, levels):
        if merge:
            keys = ", ".join(f"k{j}: *l{i - 1}" for j in range(width))
            lines.append(f"l{i}: &l{i} {{<<: *l{i - 1}, {keys}}}")
        elif mapping:
            keys = ", ".join(f"k{j}: *l{i - 1}" for j in range(width))
            lines.append(f"l{i}: &l{i} {{{keys}}}")
        else:
            lines.append(f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * width)}]")
    return "\n".join(lines) + "\n"


BOMBS = {
    "recursive-list": "a: &a [*a]\n",
    "recursive-map": "a: &a {b: *a}\n",
    "recursive-merge": "a: &a {<<: *a, x: 1}\n",
    "recursive-deep": "a: &a [[[[{b: [*a]}]]]]\n",
    "laughs-list": _laughs(),
    "laughs-map": _laughs(mapping=True),
    "laughs-merge": _laughs(merge=True),
    "nested-10k": "a: " + "[" * 10_000 + "]" * 10_000 + "\n",
}
GOOD = {
    "good-one.md": "---\ntitle: Postgres indexes\ntags: [databases]\n---\nB-tree indexes.\n",
    "good-two.md": "# Packing list\n\nPassport, charger. #travel\n",
}


def write_vault(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root


EMPTY_ANSWER = (
    "<librarian_response>\n<request_id>{{request_id}}</request_id>\n<status>ok</status>\n"
    "<summary>Nothing to change.</summary>\n<operations>\n{ops}</operations>\n"
    "<warnings></warnings>\n</librarian_response>"
)


def write_spec(tmp: Path, ops: str = "") -> Path:
    """A librarian spec whose replayed model answers with ``ops`` (none by default)."""
    answer = EMPTY_ANSWER.replace("{ops}", ops)
    (tmp / "script.jsonl").write_text(
        json.dumps({"text": answer, "finish_reason": "stop"}) + "\n", encoding="utf-8"
    )
    spec = tmp / "spec.yaml"
    spec.write_text(
        f"""name: hostile-vault
version: "1"
transport: xml_attrless
model: replay:script.jsonl
prompt_pack: {REPO / "src" / "toolwire" / "prompt_packs" / "librarian-small"}
taxonomy:
  topics: [databases, travel, cooking]
constraints:
  batch_size: 50
  max_operations: 10
  context_window_tokens: 8000
  allowed_kinds: [retag_note, retitle_note, defer]
memory:
  synthesis: "off"
""",
        encoding="utf-8",
    )
    return spec


def run_cli(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "toolwire", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=300,
    )


def _capped() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_CAP, MEMORY_CAP))


LOAD = """
import json, sys
from toolwire.librarian.notes.workspace import Workspace
ws = Workspace.load(sys.argv[1])
print(json.dumps({"notes": sorted(n.path for n in ws.notes.values()), "warnings": ws.warnings}))
"""


def test_recursive_aliases_and_alias_bombs_skip_the_note_and_the_run_goes_on(
    tmp_path: Path, tally: Tally
) -> None:
    bombs = {f"{name}.md": f"---\n{text}---\nbody\n" for name, text in BOMBS.items()}
    vault = write_vault(tmp_path / "vault", {**bombs, **GOOD})
    tally.add(AREA, "inputs tried", len(bombs))
    tally.add(AREA, "bombs", len(bombs))
    # A child process with a memory cap: the old loader walked these for ever.
    try:
        child = subprocess.run(
            [sys.executable, "-c", LOAD, str(vault)],
            capture_output=True,
            text=True,
            timeout=120,
            preexec_fn=_capped,
        )
    except subprocess.TimeoutExpired:
        tally.add(AREA, "hung", 1)
        pytest.fail("loading the notes did not finish in 120 s")
    assert child.returncode == 0, child.stderr[-2000:]
    loaded = json.loads(child.stdout)
    assert loaded["notes"] == sorted(GOOD)
    for name in bombs:
        refused = f"skipped {name}: front matter refused"
        assert any(w.startswith(refused) for w in loaded["warnings"]), name
    tally.add(AREA, "hung", 0)
    # The same vault through a real run: ok, the warnings said, not left running.
    db = tmp_path / "s.duckdb"
    ran = run_cli("run", write_spec(tmp_path), "--workspace", vault, "--db", db, "--no-prefect")
    assert ran.returncode == 0, ran.stderr[-2000:]
    assert "recursive alias" in ran.stderr and "alias bomb" in ran.stderr
    status = run_cli("sql", "--db", db, "--format", "json", "SELECT status FROM runs")
    assert json.loads(status.stdout) == [{"status": "ok"}]
