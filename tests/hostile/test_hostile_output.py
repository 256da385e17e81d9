"""Hostile model output (issue #8, item 2), data-driven, and its way through the engine.

Cases live in ``tests/data/hostile/output/cases.yaml``: each names an input (or a
generator for the big ones) and, per transport, the error code it must be
rejected with or the inert literal text it must come out as. Generated inputs
(50 MB, 100,000 levels) run in a subprocess that measures peak memory; every
outcome is searched for the first line of /etc/passwd.

The engine cases drive a 50 MB reply, a NUL and a billion-laughs DTD (and a
lone surrogate) through ``run_turn_with_repair`` with a replay provider, the
librarian's prompt pack and a real DuckDB store, exactly as a run does, and
check that every attempt is stored with its raw text intact.

Run as a script, this file is its own subprocess worker (``case`` / ``engine``).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import Any

import pytest
import yaml

from hostile.hostile_inputs import DATA, GENERATORS, MB, billion_laughs, fifty_mb
from hostile.rss import peak_rss_bytes
from hostile.tally import Tally
from toolwire.errors import ProtocolError
from toolwire.protocols.attrless import parse_response, response_to_dict
from toolwire.protocols.execute import execute_parse_to_dict, parse_execute
from toolwire.protocols.slots import parse_slots, slot_ids
from toolwire.protocols.xct import decision_to_dict, parse_decision

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
CASES_FILE = DATA / "hostile" / "output" / "cases.yaml"
TABLE: dict[str, Any] = yaml.safe_load(CASES_FILE.read_text(encoding="utf-8"))
TEMPLATES: dict[str, str] = TABLE["templates"]
EXEC_TOOLS: dict[str, Any] = json.loads((DATA / "execute" / "tools.json").read_text())
XCT_TOOLS: dict[str, Any] = json.loads((DATA / "xct" / "tools.json").read_text())
NONCE = "ai-agent-1a2b3c4d"
_PASSWD = Path("/etc/passwd")
# What an XXE would leak: the file's first line (a fixed stand-in if there is none).
PASSWD_LINE = (
    _PASSWD.read_text(errors="replace").splitlines()[0] if _PASSWD.is_file() else "root:x:0:0:"
)
_EXPECT_KEYS = ("code", "detail", "ok")


# ------------------------------------------------------------------ the cases


def _spec(case: dict[str, Any], transport: str) -> dict[str, Any]:
    """The case's input keys overridden by the transport's own."""
    own = case["transports"][transport]
    merged = {k: v for k, v in case.items() if k not in ("name", "transports")}
    if any(k in own for k in ("input", "input_bytes", "base", "generate")):
        merged = {}
    merged.update({k: v for k, v in own.items() if k not in _EXPECT_KEYS})
    return merged


def case_input(case: dict[str, Any], transport: str) -> str | bytes:
    spec = _spec(case, transport)
    if "generate" in spec:
        return GENERATORS[spec["generate"]]()
    if "input_bytes" in spec:
        return str(spec["input_bytes"]).encode("latin-1")
    if "base" in spec:
        text = TEMPLATES[spec["base"]]
        for old, new in spec.get("replace", {}).items():
            assert old in text, f"{case['name']}: {old!r} not in template {spec['base']}"
            text = text.replace(old, new)
        return text
    return str(spec["input"])


def outcome(transport: str, data: str | bytes) -> dict[str, Any]:
    """``{"ok": dict}`` or ``{"error": ProtocolError.to_dict()}``; anything else raises."""
    try:
        if transport in ("xml_attrless", "xml_attrless_strict"):
            strict = transport == "xml_attrless_strict"
            return {"ok": response_to_dict(parse_response(data, strict=strict))}
        if transport == "execute":
            return {"ok": execute_parse_to_dict(parse_execute(data, tools=EXEC_TOOLS))}
        if transport == "xct":
            return {"ok": decision_to_dict(parse_decision(data, tools=XCT_TOOLS))}
        if transport == "slots":
            assert isinstance(data, str), "slots take text"
            parsed = parse_slots(
                data,
                nonce=NONCE,
                allowed_tools=("read_file", "write_file"),
                slots=slot_ids(NONCE, 1, 4),
                mode="xml",
            )
            return {"ok": parsed.to_dict()}
    except ProtocolError as exc:
        return {"error": exc.to_dict()}
    raise ValueError(f"unknown transport {transport!r}")


def lookup(value: Any, path: str) -> Any:
    """``calls[0].args.path`` into nested dicts and lists."""
    for part in path.replace("[", ".[").split("."):
        if not part:
            continue
        value = value[int(part[1:-1])] if part.startswith("[") else value[part]
    return value


def check(transport: str, expect: dict[str, Any], out: dict[str, Any]) -> str:
    """Assert the expectation; returns "rejected" or "accepted" for the tally."""
    if "code" in expect:
        if transport == "slots":  # parse_slots never raises: the code is an invalid tag's
            codes = [tag["code"] for tag in out["ok"]["invalid"]]
            assert expect["code"] in codes, out
            assert not out["ok"]["calls"], out
            return "rejected"
        assert "error" in out, f"accepted, expected {expect['code']}: {_short(out)}"
        assert out["error"]["code"] == expect["code"], out["error"]
        if "detail" in expect:
            details = out["error"]["details"]
            assert any(d.startswith(expect["detail"]) for d in details), details
        return "rejected"
    assert "ok" in out, f"rejected, expected accepted: {out}"
    for path, value in expect["ok"].items():
        assert lookup(out["ok"], path) == value, (path, _short(out))
    return "accepted"


def _short(value: Any) -> Any:
    """Strings cut to 200 characters (a 50 MB value is not worth printing or piping)."""
    if isinstance(value, str):
        return value if len(value) <= 200 else value[:200] + f"...[{len(value)} chars]"
    if isinstance(value, dict):
        return {k: _short(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_short(v) for v in value]
    return value


def _params() -> tuple[list[Any], list[Any]]:
    small, big = [], []
    for case in TABLE["cases"]:
        for transport in case["transports"]:
            param = pytest.param(case, transport, id=f"{case['name']}-{transport}")
            (big if "generate" in _spec(case, transport) else small).append(param)
    return small, big


SMALL, BIG = _params()


def _area(case: dict[str, Any]) -> str:
    return f"output: {case['name'].replace('_', ' ')}"


@pytest.mark.timeout(30)
@pytest.mark.parametrize(("case", "transport"), SMALL)
def test_small_case(tally: Tally, case: dict[str, Any], transport: str) -> None:
    data = case_input(case, transport)
    area = _area(case)
    tally.add(area, "inputs tried")
    tracemalloc.start()
    try:
        out = outcome(transport, data)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert PASSWD_LINE not in repr(out)
    verdict = check(transport, case["transports"][transport], out)
    if verdict == "rejected":
        tally.add(area, "rejected with a code")
    assert peak < 10 * len(data) + 64 * MB


# -------------------------------------------------- big inputs, in a subprocess


def _worker(args: list[str]) -> int:
    mode, name = args[0], args[1]
    rss_base = peak_rss_bytes()
    report: dict[str, Any]
    if mode == "case":
        case = next(c for c in TABLE["cases"] if c["name"] == name)
        transport = args[2]
        data = case_input(case, transport)
        size = len(data) if isinstance(data, bytes) else len(data.encode("utf-8", "surrogatepass"))
        tracemalloc.start()
        started = time.perf_counter()
        out = outcome(transport, data)
        seconds = time.perf_counter() - started
        traced_peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        report = {
            "outcome": _short(out),
            "leak": PASSWD_LINE in repr(out),
            "input_bytes": size,
            "seconds": seconds,
            "traced_peak": traced_peak,
        }
    else:
        report = _engine(name)
        report["turn_rss_growth"] = report.pop("peak_after_turn") - rss_base
    report["rss_growth"] = peak_rss_bytes() - rss_base
    print(json.dumps(report))
    return 0


def _run_worker(*args: str, timeout: float = 240) -> dict[str, Any]:
    # tests/ on the path makes ``hostile`` importable in the worker, as conftest does here.
    path = os.pathsep.join(p for p in (str(HERE.parent), os.environ.get("PYTHONPATH")) if p)
    proc = subprocess.run(
        [sys.executable, str(Path(__file__)), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": path},
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


@pytest.mark.timeout(300)
@pytest.mark.parametrize(("case", "transport"), BIG)
def test_big_case(tally: Tally, case: dict[str, Any], transport: str) -> None:
    """Rejected (or parsed) with the expected code, in bounded memory: the parser's
    own allocations (tracemalloc) and the process's peak RSS growth, input included,
    each under 10x the input + 64 MB."""
    report = _run_worker("case", case["name"], transport)
    area = _area(case)
    tally.add(area, "inputs tried")
    assert not report["leak"]
    if check(transport, case["transports"][transport], report["outcome"]) == "rejected":
        tally.add(area, "rejected with a code")
    size = report["input_bytes"]
    bound = 10 * size + 64 * MB
    peak_mb = max(report["traced_peak"], report["rss_growth"]) / MB
    tally.add(area, f"peak MB ({transport})", round(peak_mb, 1))
    tally.note(
        area,
        f"{transport}: {size / MB:.1f} MB input handled in {report['seconds']:.2f} s, "
        f"parser peak {report['traced_peak'] / MB:.1f} MB, RSS growth "
        f"{report['rss_growth'] / MB:.1f} MB",
    )
    assert report["traced_peak"] < bound
    assert report["rss_growth"] < bound


# ------------------------------------------------------------ the engine path

_ENGINE_INPUTS = {
    "fifty_mb": fifty_mb,
    "nul": lambda: TEMPLATES["envelope"].replace("SUMMARY", "a\x00b"),
    "billion_laughs": billion_laughs,
    "lone_surrogate": lambda: TEMPLATES["envelope"].replace("SUMMARY", "a\ud800b"),
}
_ENGINE_DETAILS = {
    "fifty_mb": "RESPONSE_TOO_LARGE",
    "nul": "INVALID_CHARACTER",
    "billion_laughs": "DECLARATION_NOT_ALLOWED",
    "lone_surrogate": "INVALID_CHARACTER",
}


def _engine(name: str) -> dict[str, Any]:
    """One librarian turn over a replayed hostile reply, recorded in a real store."""
    from toolwire.domain import CompletionRequest
    from toolwire.librarian.repair import format_errors_for_repair, run_turn_with_repair
    from toolwire.promptpack.pack import load_pack, render_stage
    from toolwire.providers.replay import ReplayProvider
    from toolwire.store import Store

    text = _ENGINE_INPUTS[name]()
    tmp = Path(tempfile.mkdtemp(prefix="toolwire-hostile-engine-"))
    script = tmp / "script.jsonl"
    line = json.dumps({"text": text, "finish_reason": "stop"})  # \ud800 stays an escape
    script.write_text((line + "\n") * 3, encoding="utf-8")
    provider = ReplayProvider(script)
    store = Store(tmp / "store.duckdb")
    run_id = f"hostile-{name}"
    store.start_run(
        {
            "run_id": run_id,
            "spec_name": "librarian",
            "job": "librarian",
            "transport": "xml_attrless",
            "provider": "replay",
            "model": "replay",
        }
    )
    pack = load_pack(REPO / "src" / "toolwire" / "prompt_packs" / "librarian-small")
    first = render_stage(pack, "propose", {"request_xml": "<librarian_request/>"})
    crashed = None
    started = time.perf_counter()
    try:
        result = run_turn_with_repair(
            turn=1,
            request_id="r1",
            first_messages=first,
            call=provider.complete,
            make_request=lambda m: CompletionRequest(messages=m, variables={"request_id": "r1"}),
            parse=lambda c: parse_response(c.text),
            repair_messages=lambda e, o: render_stage(
                pack,
                "validate_repair",
                {"errors": format_errors_for_repair(e), "original_response": o},
            ),
            max_repairs=2,
            on_attempt=lambda a: store.record_attempt(run_id, a),
        )
        error = result.error.to_dict() if result.error else None
    except Exception as exc:  # reported, not raised: the test asserts on it
        crashed, error = f"{type(exc).__name__}: {str(exc)[:300]}", None
    seconds = time.perf_counter() - started
    peak_after_turn = peak_rss_bytes()  # before the read-back below adds its own copies
    _, rows = store.query(
        "SELECT attempt, error_code, error_codes, raw_text, length(prompt_json) "
        "FROM attempts WHERE run_id = ? ORDER BY attempt",
        [run_id],
    )
    shutil.rmtree(tmp, ignore_errors=True)  # the store holds 150 MB after the fifty_mb case
    return {
        "crashed": crashed,
        "error": _short(error),
        "seconds": seconds,
        "input_chars": len(text),
        "peak_after_turn": peak_after_turn,
        "attempts": [
            {
                "attempt": r[0],
                "code": r[1],
                "details": list(r[2] or []),
                "raw_intact": r[3] == text,
                "raw_escaped": r[3] == text.encode("utf-8", "backslashreplace").decode(),
                "raw_chars": len(r[3]),
                "prompt_json_chars": r[4],
            }
            for r in rows
        ],
    }


def _engine_case(tally: Tally, name: str) -> dict[str, Any]:
    report = _run_worker("engine", name)
    area = f"output: engine {name.replace('_', ' ')}"
    tally.add(area, "inputs tried", 3)
    tally.add(area, "rows lost", 3 - len(report["attempts"]))
    tally.note(
        area,
        f"3 attempts of {report['input_chars'] / MB:.2f} M chars in {report['seconds']:.2f} s; "
        f"stored raw_text {[a['raw_chars'] for a in report['attempts']]} chars, prompt_json "
        f"{[a['prompt_json_chars'] for a in report['attempts']]} chars; RSS growth "
        f"{report['turn_rss_growth'] / MB:.0f} MB by the end of the turn, "
        f"{report['rss_growth'] / MB:.0f} MB after reading the rows back; "
        f"crash: {report['crashed']}",
    )
    return report


@pytest.mark.timeout(300)
@pytest.mark.parametrize("name", ["fifty_mb", "nul", "billion_laughs"])
def test_engine_records_every_hostile_attempt_intact(tally: Tally, name: str) -> None:
    """Three attempts (first + two repairs), each stored with its exact raw text and
    the expected code; the turn ends in a protocol error, not a crash."""
    report = _engine_case(tally, name)
    assert report["crashed"] is None
    assert report["error"]["code"] == "LIBRARIAN_PROTOCOL_INVALID"
    # The repair prompt echoes at most the ends of the reply, not 50 MB of it.
    assert max(a["prompt_json_chars"] for a in report["attempts"]) < 40_000
    assert [a["attempt"] for a in report["attempts"]] == [0, 1, 2]
    for attempt in report["attempts"]:
        assert attempt["raw_intact"], attempt
        assert attempt["code"] == "LIBRARIAN_PROTOCOL_INVALID"
        assert _ENGINE_DETAILS[name] in attempt["details"]
    tally.add(f"output: engine {name.replace('_', ' ')}", "rejected with a code", 3)


@pytest.mark.timeout(300)
def test_engine_records_a_lone_surrogate_reply(tally: Tally) -> None:
    """No UTF-8 column holds a lone surrogate: the store keeps it as its escape."""
    report = _engine_case(tally, "lone_surrogate")
    assert report["crashed"] is None
    assert report["error"]["code"] == "LIBRARIAN_PROTOCOL_INVALID"
    assert [a["attempt"] for a in report["attempts"]] == [0, 1, 2]
    for attempt in report["attempts"]:
        assert attempt["raw_escaped"], attempt
        assert "INVALID_CHARACTER" in attempt["details"]
    tally.add("output: engine lone surrogate", "rejected with a code", 3)


# ------------------------------------------- native arguments (provider side)


@pytest.mark.timeout(30)
def test_native_deeply_nested_arguments_are_kept_raw(tally: Tally) -> None:
    from types import SimpleNamespace

    from toolwire.domain import Completion
    from toolwire.protocols.native import parse_native
    from toolwire.providers.openai_compat import parse_tool_calls

    tally.add("output: native deep arguments", "inputs tried")
    raw = "[" * 100_000 + "]" * 100_000
    call = SimpleNamespace(id="c1", function=SimpleNamespace(name="read_file", arguments=raw))
    parsed = parse_native(Completion(text="", tool_calls=parse_tool_calls([call])))
    assert [bad.code for bad in parsed.invalid] == ["INVALID_JSON_ARGS"]
    tally.add("output: native deep arguments", "rejected with a code")


if __name__ == "__main__":
    sys.exit(_worker(sys.argv[1:]))
