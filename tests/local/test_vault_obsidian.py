"""An Obsidian-style vault through a real run (issue 28 item 3): `toolwire run` as a process.

``tests/data/vault_obsidian`` holds settings, templates, daily notes (a folder
and a dated journal file), an Excalidraw drawing and attachments beside notes
tagged every way a vault tags them: a nested block-list tag with a comment, a
space-separated string, inline ``#tags``, a flow list with a comment inside, a
comma string of nested tags, none at all. The replayed answer retags every note,
reaches for two excluded files and retitles one note (refused: the vault titles notes
by file name, issue 42). Pinned: no excluded file
is read into the request or touched (bytes and mtime), notes that already carry
their topic (nested, inline, string) are left byte for byte, and every edited
note keeps its tags in the form it had, comments where they were.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.local

REPO = Path(__file__).resolve().parents[2]
VAULT = REPO / "tests" / "data" / "vault_obsidian"
EXCLUDED = (
    ".obsidian/app.json",
    "Templates/Recipe.md",
    "Templates/Daily.md",
    "Daily/2024-05-01.md",
    "journal/2024-05-02.md",
    "Drawings/Kitchen.excalidraw.md",
    "attachments/scan-notes.md",
    "attachments/photo.png",
)
ALREADY_TAGGED = ("Cooking/Sourdough.md", "Finance/Index funds.md", "Travel/Packing.md")


def _op(n: int, kind: str, target: str, body: str, title: str = "-", path: str = "") -> str:
    where = (
        f"<target_path>{path}</target_path>"
        if path
        else f"<target_note_id>{target}</target_note_id>"
    )
    return (
        f"<operation>\n<operation_id>op_{n}</operation_id>\n<kind>{kind}</kind>\n{where}\n"
        f"<title>{title}</title>\n<body_markdown>{body}</body_markdown>\n"
        f"<reason>fixture</reason>\n<confidence>0.9</confidence>\n</operation>\n"
    )


OPS = [
    ("retag_note", "Cooking/Sourdough", "cooking"),  # carries cooking/bread: no change
    ("retag_note", "Finance/Index funds", "finance"),  # "finance investing": no change
    ("retag_note", "Travel/Packing", "travel"),  # "travel/lists, checklist": no change
    ("retag_note", "Finance/Budget", "finance"),  # inline #finance: no change
    ("retag_note", "Databases/Postgres vacuum", "databases"),  # flow list with a comment
    ("retag_note", "Databases/Indexes", "databases"),  # block list with a comment
    ("retag_note", "Inbox/Passport renewal", "travel"),  # untagged but #idea
    ("retag_note", "Templates/Recipe", "cooking"),  # excluded: not a note
]
ANSWER = (
    "<librarian_response>\n<request_id>{{request_id}}</request_id>\n<status>ok</status>\n"
    "<summary>Retag the vault.</summary>\n<operations>\n"
    + "".join(_op(i + 1, kind, target, body) for i, (kind, target, body) in enumerate(OPS))
    + _op(9, "retitle_note", "Finance/Budget", "-", title="Monthly budget plan")
    + _op(10, "create_note", "", "A new template.", title="New", path="Templates/New.md")
    + "</operations>\n<warnings></warnings>\n</librarian_response>"
)


def _spec(tmp: Path) -> Path:
    (tmp / "script.jsonl").write_text(
        json.dumps({"text": ANSWER, "finish_reason": "stop"}) + "\n", encoding="utf-8"
    )
    spec = tmp / "spec.yaml"
    spec.write_text(
        f"""name: vault-test
version: "1"
transport: xml_attrless
model: replay:script.jsonl
prompt_pack: {REPO / "src" / "toolwire" / "prompt_packs" / "librarian-small"}
taxonomy:
  topics: [cooking, finance, databases, travel]
constraints:
  batch_size: 20
  max_operations: 20
  context_window_tokens: 8000
  allowed_kinds: [retag_note, retitle_note, create_note, defer]
memory:
  synthesis: "off"
""",
        encoding="utf-8",
    )
    return spec


def _state(root: Path) -> dict[str, tuple[bytes, int]]:
    return {
        str(p.relative_to(root)): (p.read_bytes(), p.stat().st_mtime_ns)
        for p in sorted(root.rglob("*"))
        if p.is_file() and ".toolwire" not in p.parts
    }


def test_a_vault_run_touches_no_excluded_file_and_keeps_every_tag_form(tmp_path: Path) -> None:
    ws = tmp_path / "vault"
    shutil.copytree(VAULT, ws)
    before = _state(ws)
    ran = subprocess.run(
        [sys.executable, "-m", "toolwire", "run", str(_spec(tmp_path)), "--workspace", str(ws)]
        + ["--db", str(tmp_path / "s.duckdb"), "--no-prefect"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert ran.returncode == 0, ran.stderr
    after = _state(ws)
    assert set(after) == set(before)  # nothing created (Templates/New.md refused)
    for rel in (*EXCLUDED, *ALREADY_TAGGED):
        assert after[rel] == before[rel], rel  # bytes and mtime
    db = str(tmp_path / "s.duckdb")

    def rows(sql: str) -> list[dict[str, object]]:
        done = subprocess.run(
            [sys.executable, "-m", "toolwire", "sql", "--db", db, "--format", "json", sql],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, done.stderr
        return list(json.loads(done.stdout))

    # The request shows the model no excluded file.
    sent = str(rows("SELECT prompt_json FROM attempts")[0]["prompt_json"])
    assert "Templates" not in sent and "2024-05-0" not in sent and "excalidraw" not in sent
    codes = {(r["target"], r["code"]) for r in rows("SELECT target, code FROM operations")}
    assert ("Templates/Recipe", "TARGET_NOT_FOUND") in codes
    assert ("Templates/New.md", "INVALID_PATH") in codes
    # Two notes in seven have a title property: the vault titles notes by file name, and
    # toolwire renames no file (issue 42), so the retitle is refused; Budget keeps its
    # inline #finance and is left byte for byte.
    assert ("Finance/Budget", "TITLE_IS_FILE_NAME") in codes
    assert after["Finance/Budget.md"] == before["Finance/Budget.md"]
    text = {rel: after[rel][0].decode("utf-8") for rel in after if rel.endswith(".md")}
    # Flow list with a comment inside: the topic joins the list, the comment stays put;
    # `title: no` stays the text it was; no `topic:` (the vault has none).
    assert text["Databases/Postgres vacuum.md"].startswith(
        "---\ntitle: no\ntags: [databases, postgres, # the engine I use\n  sql]\n---\n"
    )
    # Block list with a comment: a new line in the list's own indentation.
    assert text["Databases/Indexes.md"].startswith(
        "---\ntags:\n  - databases\n  - sql  # how I query\n  - performance\n---\n# Indexes\n"
    )
    # Untagged (an inline #idea only): a front matter block with the vault's most used
    # list form (block: two notes, as many as strings, Obsidian's own); the body is the same.
    note = text["Inbox/Passport renewal.md"]
    assert note.startswith("---\ntags:\n  - travel\n---\n")
    assert note.endswith(before["Inbox/Passport renewal.md"][0].decode("utf-8"))
