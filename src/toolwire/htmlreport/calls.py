"""One run in detail: every request (prompt, raw output, tokens, latency, validity), the
agent's tool calls with their arguments and results and its final report, the
librarian's operations with what changed.

The prompt of a request is the message list stored in ``attempts.prompt_json``. A
request that repeats the previous one's messages (an agent's growing conversation)
shows only its new messages, so the page grows with the run, not with its square.
"""

from __future__ import annotations

import json
from typing import Any

from toolwire.htmlreport.data import NO_TOOL, ReportData, plural, run_state
from toolwire.htmlreport.svg import esc, num

__all__ = ["changes_table", "group_label", "run_section", "table", "text_block"]

MAX_TEXT = 20_000  # characters of one text shown; the rest stays in the store
_FINAL_TOOL = "agent__final_report"


def group_label(row: dict[str, Any]) -> str:
    """``provider:model / transport``; a replay model by its script's file name."""
    model = str(row.get("model") or "")
    if row.get("provider") == "replay":
        model = model.replace("\\", "/").rsplit("/", 1)[-1]
    return f"{row.get('provider')}:{model} / {row.get('transport')}"


def table(columns: list[str], rows: list[list[str]], css: str = "") -> str:
    """Cells are HTML already (escaped by the caller)."""
    head = "".join(f"<th>{esc(c)}</th>" for c in columns)
    body = "".join("<tr>" + "".join(f"<td>{cell}</td>" for cell in row) + "</tr>" for row in rows)
    return f'<table class="{css}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def changes_table(changes: list[dict[str, Any]]) -> str:
    """Old -> new per note and field (the note_changes rows of one run)."""
    rows = [
        [esc(c["path"]), esc(c["field"]), esc(c["old_value"] or "—"), esc(c["new_value"] or "—")]
        for c in changes
    ]
    return table(["note", "field", "old", "new"], rows)


def text_block(text: str | None, css: str = "txt") -> str:
    """Untrusted text in a ``<pre>``, cut at :data:`MAX_TEXT` characters."""
    if text is None:
        return '<p class="none">(not stored)</p>'
    if len(text) <= MAX_TEXT:
        return f'<pre class="{css}">{esc(text)}</pre>'
    more = len(text) - MAX_TEXT
    return (
        f'<pre class="{css}">{esc(text[:MAX_TEXT])}</pre>'
        f'<p class="none">… {more} more characters in the store</p>'
    )


def _pretty(raw: str | None) -> str | None:
    """Stored JSON indented for reading; text that is not JSON as it is."""
    if raw is None:
        return None
    try:
        return json.dumps(json.loads(raw), indent=1, ensure_ascii=False)
    except ValueError:
        return raw


# -- requests --------------------------------------------------------------------------------


def _messages(prompt_json: str | None) -> list[dict[str, Any]] | None:
    try:
        messages = json.loads(prompt_json) if prompt_json else None
    except ValueError:
        return None
    if isinstance(messages, list) and all(isinstance(m, dict) for m in messages):
        return messages
    return None


def _message_html(message: dict[str, Any]) -> str:
    head = str(message.get("role", "?"))
    if message.get("tool_call_id"):
        head += f" (result of {message['tool_call_id']})"
    content = message.get("content")
    body = ""
    if content is not None:
        text = content if isinstance(content, str) else json.dumps(content, ensure_ascii=False)
        body = text_block(text)
    for call in message.get("tool_calls") or []:
        fn = call.get("function", {}) if isinstance(call, dict) else {}
        name = f"tool call {call.get('id', '')} {fn.get('name', '')}".strip()
        args = fn.get("arguments")
        text = args if isinstance(args, str) else json.dumps(args, ensure_ascii=False)
        body += f'<div class="role">{esc(name)}</div>' + text_block(text)
    return f'<div class="msg"><div class="role">{esc(head)}</div>{body}</div>'


def _prompt_html(prompt_json: str | None, previous: list[dict[str, Any]], prev: str) -> str:
    if prompt_json is None:
        return '<p class="none">The prompt of this request was not stored.</p>'
    messages = _messages(prompt_json)
    if messages is None:
        return '<p class="none">Stored prompt (not a message list):</p>' + text_block(prompt_json)
    shared = 0
    while shared < min(len(messages), len(previous)) and messages[shared] == previous[shared]:
        shared += 1
    note = ""
    if shared:
        note = (
            f'<p class="none">{plural(shared, "message")} as in {esc(prev)}, then '
            f"{plural(len(messages) - shared, 'new message')}:</p>"
        )
    return note + "".join(_message_html(m) for m in messages[shared:])


def _which(a: dict[str, Any]) -> str:
    """The attempt's place in its turn (a first_tool row is the side request, attempt -1)."""
    if a["kind"] == "first_tool":
        return "first-tool choice"
    return "first try" if a["attempt"] == 0 else f"repair {a['attempt']}"


def _attempt_title(a: dict[str, Any]) -> str:
    which = _which(a)
    codes = [c for c in [a["error_code"], *(a["error_codes"] or [])] if c]
    valid = "valid" if a["parse_ok"] else "invalid" + (f" ({', '.join(codes)})" if codes else "")
    return (
        f"turn {a['turn'] + 1}, {which}: {valid}; tokens in/out "
        f"{num(a['input_tokens'])}/{num(a['output_tokens'])}; {num(a['latency_ms'], 0)} ms; "
        f"finish {a['finish_reason'] or '-'}"
    )


def _attempts_html(run_id: str, attempts: list[dict[str, Any]]) -> str:
    if not attempts:
        return "<h3>Requests</h3><p>No model requests stored.</p>"
    parts: list[str] = []
    previous: list[dict[str, Any]] = []
    prev = ""
    for a in attempts:
        title = _attempt_title(a)
        css = "repair" if a["kind"] == "repair" else ("bad" if not a["parse_ok"] else "")
        parts.append(
            f'<details class="attempt {css}" id="att-{esc(run_id)}-{a["turn"]}-{a["attempt"]}">'
            f"<summary>{esc(title)}</summary><h4>Prompt</h4>"
            f"{_prompt_html(a['prompt_json'], previous, prev)}"
            f"<h4>Raw output</h4>{text_block(a['raw_text'], 'txt raw')}</details>"
        )
        previous = _messages(a["prompt_json"]) or []
        prev = f"turn {a['turn'] + 1}, {_which(a)}"
    return f"<h3>Requests ({len(attempts)})</h3>" + "".join(parts)


# -- agent runs ------------------------------------------------------------------------------


def _final_html(run: dict[str, Any], calls: list[dict[str, Any]]) -> str:
    finals = [c for c in calls if c["tool"] == _FINAL_TOOL and c["status"] == "success"]
    if not finals:
        why = f"{run['error_code']}: {run['error_message']}" if run["error_code"] else "none"
        return f'<h3>Final report</h3><p class="none">No final report accepted ({esc(why)}).</p>'
    final = finals[-1]
    if final["args_json"] is None:
        return (
            '<h3>Final report</h3><p class="none">Accepted; its text was not stored by this '
            "older run (see the last raw output below).</p>"
        )
    try:
        payload = json.loads(final["args_json"])
    except ValueError:
        payload = {"content": final["args_json"]}
    content = payload.get("content") if isinstance(payload, dict) else payload
    status = payload.get("status", "?") if isinstance(payload, dict) else "?"
    text = content if isinstance(content, str) else json.dumps(content, ensure_ascii=False)
    title = f"Final report (the model's status: {status})"
    return f"<h3>{esc(title)}</h3>{text_block(text, 'txt final')}"


def _stored(text: str | None, size: int | None) -> str:
    """The stored text, else its size (older runs), else a dash."""
    if text:
        return text_block(text)
    return "-" if not size else f'<span class="none">{size} B, not stored</span>'


def _calls_html(calls: list[dict[str, Any]]) -> str:
    if not calls:
        return "<h3>Tool calls</h3><p>No tool calls.</p>"
    rows = [
        [
            num(c["turn"] + 1),
            num(c["seq"]),
            f"<code>{esc(c['tool'] or NO_TOOL)}</code>",
            esc(c["source"]),
            f'<span class="st-{esc(c["status"])}">{esc(c["status"])}</span>',
            num(c["duration_ms"], 1),
            _stored(_pretty(c["args_json"]), c["args_bytes"]),
            "-" if c["tool"] == _FINAL_TOOL else _stored(c["result_text"], c["result_bytes"]),
            esc(c["error"] or ""),
        ]
        for c in calls
    ]
    columns = ["turn", "#", "tool", "via", "status", "ms", "arguments", "result", "error"]
    note = ""
    if all(c["args_json"] is None and c["result_text"] is None for c in calls):
        note = (
            '<p class="none">This run is older than the store\'s tool-call texts: only sizes '
            "were stored; the arguments are in the raw outputs and the results in the next "
            "request's prompt.</p>"
        )
    return f"<h3>Tool calls ({len(calls)})</h3>{note}" + table(columns, rows, "calls")


# -- librarian runs --------------------------------------------------------------------------


def _diff_html(diff: str) -> str:
    lines = []
    for line in diff.splitlines():
        css = ""
        if line.startswith(("+++", "---", "@@")):
            css = "dh"
        elif line.startswith("+"):
            css = "da"
        elif line.startswith("-"):
            css = "dd"
        lines.append(f'<span class="{css}">{esc(line)}</span>' if css else esc(line))
    return '<pre class="diff">' + "\n".join(lines) + "</pre>"


def _librarian_html(data: ReportData, run_id: str, run_dry: bool) -> str:
    """What changed (old -> new per field), what waits, every operation, the diff."""
    ops, changes = data.operations.get(run_id, []), data.changes.get(run_id, [])
    parts = []
    if changes:
        parts.append("<h3>What changed</h3>" + changes_table(changes))
    deferred = [[esc(o["target"]), esc(o["why"] or "")] for o in ops if o["status"] == "deferred"]
    if deferred:
        parts.append("<h3>Deferred</h3>" + table(["note", "why"], deferred))
    rows = [
        [
            num(o["turn"] + 1),
            esc(o["operation_id"]),
            esc(o["kind"]),
            esc(o["target"]),
            esc(o["title"]),
            f'<span class="st-{esc(o["status"])}">{esc(o["status"])}</span>',
            esc(o["code"] or ""),
            num(o["confidence"]),
            esc(o["why"] or ""),
        ]
        for o in ops
    ]
    columns = ["turn", "op", "kind", "target", "title", "status", "code", "conf", "why"]
    parts.append(f"<h3>Operations ({len(ops)})</h3>")
    parts.append(table(columns, rows, "ops") if rows else "<p>No operations.</p>")
    diff = data.diffs.get(run_id)
    changed = "<h3>Planned changes</h3>" if run_dry else "<h3>Changes</h3>"
    parts.append(changed + _diff_html(diff) if diff else "<p>No changes to the notes.</p>")
    return "".join(parts)


def run_section(data: ReportData, run: dict[str, Any]) -> str:
    """One ``<details>`` per run: its facts, what it did, then every request."""
    run_id = run["run_id"]
    calls, attempts = data.calls.get(run_id, []), data.attempts.get(run_id, [])
    ops = data.operations.get(run_id, [])
    agent = run["job"] == "agent" or (run["job"] is None and bool(calls))
    did = plural(len(calls), "tool call") if agent else plural(len(ops), "operation")
    facts = [f"job {run['job'] or '?'}", f"spec {run['spec_name']}"]
    facts += ["dry run"] if run["dry_run"] else []
    facts += [f"workspace {run['workspace']}"] if run["workspace"] else []
    error = ""
    if run["error_code"]:
        error = f'<p class="st-Failed">{esc(run["error_code"])}: {esc(run["error_message"])}</p>'
    body = _final_html(run, calls) + _calls_html(calls) if agent else ""
    body += _librarian_html(data, run_id, bool(run["dry_run"])) if not agent or ops else ""
    return (
        f'<details class="run" id="run-{esc(run_id)}"><summary><code>{esc(run_id)}</code> '
        f"{esc(group_label(run))}: {esc(run_state(run))}, {did}, "
        f"{plural(len(attempts), 'request')}</summary>"
        f"<p>{esc('; '.join(facts))}</p>{error}{body}{_attempts_html(run_id, attempts)}</details>"
    )
