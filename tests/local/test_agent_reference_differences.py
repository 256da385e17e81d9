"""Five shapes toolwire reads differently from seed 001's reference implementation, on
purpose (issue 46; README "Where toolwire differs from seed 001's reference"): each
decision is pinned here through ``toolwire parse --spec``, as a user would check it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.local

REPO = Path(__file__).resolve().parents[2]
NONCE = "ai-agent-0123abcd"
FINAL = f"{NONCE}-FINAL"


def _spec(tmp: Path, transport: str, report_format: str) -> Path:
    text = (REPO / "specs" / f"agent-{transport}.yaml").read_text(encoding="utf-8")
    text = text.replace("format: text", f"format: {report_format}").replace(
        "replay:../tests", f"replay:{REPO / 'tests'}"
    )
    spec = tmp / f"{transport}-{report_format}.yaml"
    spec.write_text(text, encoding="utf-8")
    return spec


def _parse(tmp: Path, transport: str, report_format: str, reply: str, *extra: str) -> Any:
    path = tmp / "reply.txt"
    path.write_text(reply, encoding="utf-8")
    spec = _spec(tmp, transport, report_format)
    args = ["parse", "--transport", transport, "--spec", str(spec), str(path), *extra]
    if transport != "native":
        args += ["--nonce", NONCE]
    out = subprocess.run(
        [sys.executable, "-m", "toolwire", *args], capture_output=True, text=True, timeout=120
    )
    assert "Traceback" not in out.stderr, out.stderr
    return json.loads(out.stdout)["turn"]


def test_an_xml_turn_with_only_progress_moves_nothing(tmp_path: Path) -> None:
    reply = f"<{NONCE}-PROGRESS>Reading the notes now</{NONCE}-PROGRESS>"
    turn = _parse(tmp_path, "xml", "text", reply)
    assert (turn["usable"], turn["calls"], turn["final"]) == (False, [], None)
    assert turn["progress"] == "Reading the notes now"


def test_an_xml_final_turn_without_tags_is_not_the_answer(tmp_path: Path) -> None:
    turn = _parse(tmp_path, "xml-final", "text", "The task was completed.")
    assert (turn["usable"], turn["final"]) == (False, None)


def test_a_tty_report_cut_at_the_limit_is_kept_marked_truncated(tmp_path: Path) -> None:
    reply = f'<{FINAL} status="success" format="tty">\x1b[1mDone\x1b[0m: three files and'
    turn = _parse(tmp_path, "xml", "tty", reply, "--finish-reason", "length")
    assert turn["usable"] is True
    assert (turn["final"]["format"], turn["final"]["metadata"]) == ("tty", {"truncated": True})


def test_a_top_level_slack_array_is_stored_as_messages(tmp_path: Path) -> None:
    blocks = [{"blocks": [{"type": "section", "text": {"type": "mrkdwn", "text": "hi"}}]}]
    reply = f'<{FINAL} status="success" format="slack-block-kit">{json.dumps(blocks)}</{FINAL}>'
    turn = _parse(tmp_path, "xml", "slack-block-kit", reply)
    assert turn["usable"] is True and turn["final"]["content"] == {"messages": blocks}


def test_an_unclosed_leaked_tools_block_still_runs_its_call(tmp_path: Path) -> None:
    reply = 'Let me look. <tools>{"name": "list_dir", "arguments": {"path": "notes"}}'
    turn = _parse(tmp_path, "native", "text", reply)
    assert turn["usable"] is True
    assert [(c["tool"], c["args"], c["source"]) for c in turn["calls"]] == [
        ("list_dir", {"path": "notes"}, "leaked")
    ]
