"""``toolwire parse`` without ``--spec`` checks the wire format only (issue 32 item 6).

Before, ``parse --transport execute FILE`` refused every argument
(``UNKNOWN_ARG ... known: none``) although the README says that without a spec
any tool and any arguments are accepted. Real processes, as a user runs them.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.local

REPO = Path(__file__).resolve().parents[2]
URL = "http://127.0.0.1:9/v1"
REPLIES = {
    "execute": "<execute>\n<read_file><path>a.md</path><lines>3</lines></read_file>\n</execute>\n",
    "xct": json.dumps(
        {"next_step": {"tool": "read_file", "arguments": {"path": "a.md"}, "goal": "read it"}}
    ),
    "xml": '<ai-agent-0123abcd-0001 tool="read_file">{"path": "a.md"}</ai-agent-0123abcd-0001>',
}


def _parse(tmp_path: Path, transport: str, text: str, *extra: str) -> dict[str, object]:
    reply = tmp_path / f"{transport}.txt"
    reply.write_text(text, encoding="utf-8")
    out = subprocess.run(
        [sys.executable, "-m", "toolwire", "parse", "--transport", transport, str(reply), *extra],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert "Traceback" not in out.stderr, out.stderr
    payload = json.loads(out.stdout)
    assert (out.returncode == 0) == payload["ok"]
    return payload


@pytest.mark.parametrize("transport", sorted(REPLIES))
def test_without_a_spec_any_tool_and_arguments_pass(tmp_path: Path, transport: str) -> None:
    payload = _parse(tmp_path, transport, REPLIES[transport])
    assert payload["ok"] is True, payload


def test_with_a_spec_the_tools_arguments_are_checked(tmp_path: Path) -> None:
    spec = REPO / "specs" / "agent-execute.yaml"
    payload = _parse(tmp_path, "execute", REPLIES["execute"], "--spec", str(spec))
    assert payload["ok"] is False
    assert payload["error"]["details"] == ["call[0]:UNKNOWN_ARG:lines"]  # type: ignore[index]


@pytest.mark.parametrize(
    ("transport", "model", "noted"),
    [
        ("native", '"llamacpp:smollm2-135m"', True),
        (
            "xml-final",
            '{name: "openai:m", server: llamacpp, base_url: "' + URL + '"}',
            True,
        ),
        ("native", '{name: "openai:m", server: ollama, base_url: "' + URL + '"}', False),
        ("xct", '"llamacpp:smollm2-135m"', False),
    ],
)
def test_spec_check_says_when_the_tools_go_in_the_prompt(
    tmp_path: Path, transport: str, model: str, noted: bool
) -> None:
    spec = tmp_path / "agent.yaml"
    spec.write_text(
        f"""name: carriage
version: "1"
transport: {transport}
model: {model}
prompt_pack: {REPO / "src" / "toolwire" / "prompt_packs" / "agent"}
goal: List the folder.
tools:
  - {{name: list_dir, description: List a folder., implementation: "builtin:list_dir"}}
""",
        encoding="utf-8",
    )
    out = subprocess.run(
        [sys.executable, "-m", "toolwire", "spec", "check", str(spec)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert ("tools are written into the prompt" in out.stderr) is noted, out.stderr
