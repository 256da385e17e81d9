"""replay: scripts, placeholders, exhaustion, bad lines; recording round trips; the registry."""

from __future__ import annotations

import json
import re
from pathlib import Path
from types import SimpleNamespace

import pytest

from toolwire.domain import Completion, CompletionRequest, ToolCall
from toolwire.errors import REPLAY_EXHAUSTED, ProviderError, UsageError
from toolwire.providers import make_provider
from toolwire.providers.recording import RecordingProvider, completion_to_record
from toolwire.providers.replay import ReplayProvider, load_script, substitute_variables

pytestmark = pytest.mark.unit

DATA = Path(__file__).resolve().parents[1] / "data" / "replay"
BAD_SCRIPTS = sorted(DATA.glob("bad_*.jsonl"))
GOOD_SCRIPTS = sorted(set(DATA.glob("*.jsonl")) - set(BAD_SCRIPTS))


def _request(**variables: str) -> CompletionRequest:
    return CompletionRequest(messages=[{"role": "user", "content": "hi"}], variables=variables)


# --- replay --------------------------------------------------------------------------


def test_completions_come_back_in_order_with_their_fields() -> None:
    provider = ReplayProvider(DATA / "two_turns.jsonl", name="replay:two_turns.jsonl")
    first = provider.complete(_request())
    second = provider.complete(_request())
    assert (first.text, first.finish_reason, first.input_tokens, first.output_tokens) == (
        "first answer",
        "stop",
        120,
        7,
    )
    assert (second.text, second.finish_reason, second.output_tokens) == (
        "second answer, cut",
        "length",
        256,
    )
    assert first.model == "replay:two_turns.jsonl"
    assert provider.remaining == 0


def test_running_out_is_a_terminal_replay_exhausted_error() -> None:
    provider = ReplayProvider(DATA / "two_turns.jsonl")
    provider.complete(_request())
    provider.complete(_request())
    with pytest.raises(ProviderError) as info:
        provider.complete(_request())
    assert info.value.code == REPLAY_EXHAUSTED
    assert info.value.transient is False
    assert "has 2 completions; the run asked for the 3rd" in info.value.message
    assert "two_turns.jsonl" in info.value.message


def test_placeholders_are_filled_once_and_unknown_ones_kept() -> None:
    provider = ReplayProvider(DATA / "placeholders.jsonl")
    # A value that itself looks like a placeholder must not be expanded again.
    first = provider.complete(_request(request_id="req_7", nonce="{{request_id}}"))
    assert first.text == "<request_id>req_7</request_id> {{request_id}} {{unknown}} req_7"


def test_placeholders_are_filled_inside_tool_call_arguments() -> None:
    provider = ReplayProvider(DATA / "placeholders.jsonl")
    provider.complete(_request(request_id="r1", nonce="n1"))
    second = provider.complete(_request(request_id="r1", nonce="n1", user="ana"))
    assert second.finish_reason == "tool_calls"
    assert second.tool_calls == (
        ToolCall(
            id="call_{{nonce}}",  # ids are the model's: not substituted
            tool="write_file",
            args={"path": "notes/r1.md", "lines": ["n1", 3, None], "meta": {"who": "ana"}},
        ),
    )
    third = provider.complete(_request(request_id="r1"))
    assert third.tool_calls[0].args == {"dir": "r1"}  # arguments given as a JSON string


def test_grammar_is_ignored() -> None:
    provider = ReplayProvider(DATA / "two_turns.jsonl")
    assert provider.supports_grammar is False
    request = CompletionRequest(messages=[], grammar='root ::= "x"')
    assert provider.complete(request).text == "first answer"


def test_substitute_variables_leaves_other_types_alone() -> None:
    assert substitute_variables(3, {"a": "b"}) == 3
    assert substitute_variables("{{a}}{{b}}", {}) == "{{a}}{{b}}"
    assert substitute_variables({"k": ["{{a}}"]}, {"a": "x"}) == {"k": ["x"]}


@pytest.mark.parametrize("path", BAD_SCRIPTS, ids=lambda p: p.name)
def test_bad_script_names_file_and_line(path: Path) -> None:
    expected = re.search(r"^// error-line: (\d+)$", path.read_text(), re.M)
    assert expected, f"{path.name} must declare its error line"
    with pytest.raises(UsageError) as info:
        ReplayProvider(path)
    assert f"{path}:{expected.group(1)}:" in info.value.message


@pytest.mark.parametrize("path", GOOD_SCRIPTS, ids=lambda p: p.name)
def test_every_shipped_script_loads(path: Path) -> None:
    assert len(load_script(path)) >= 1


def test_missing_script_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="does not exist"):
        ReplayProvider(tmp_path / "nope.jsonl")


def test_empty_script_is_exhausted_on_the_first_call(tmp_path: Path) -> None:
    path = tmp_path / "empty.jsonl"
    path.write_text("// nothing recorded\n\n")
    with pytest.raises(ProviderError, match="has 0 completions; the run asked for the 1st"):
        ReplayProvider(path).complete(_request())


# --- recording -----------------------------------------------------------------------


class _ScriptedModel:
    """A stand-in for a real model: answers with the request's ids inside the text."""

    name = "fake:model"
    supports_grammar = True

    def __init__(self) -> None:
        self.closed = False

    def complete(self, request: CompletionRequest) -> Completion:
        rid, nonce = request.variables["request_id"], request.variables["nonce"]
        return Completion(
            text=f"<request_id>{rid}</request_id>\n<{nonce}-0001>x</{nonce}-0001>",
            finish_reason="stop",
            tool_calls=(ToolCall(id="c1", tool="write", args={"path": f"{rid}.md", "n": 2}),),
            input_tokens=40,
            output_tokens=12,
            latency_ms=87.5,
            model="fake:model",
        )

    def close(self) -> None:
        self.closed = True


def _replayable(c: Completion) -> tuple[object, ...]:
    return (c.text, c.finish_reason, c.tool_calls, c.input_tokens, c.output_tokens)


def test_record_then_replay_gives_identical_completions(tmp_path: Path) -> None:
    path = tmp_path / "rec" / "run.jsonl"
    recorder = RecordingProvider(_ScriptedModel(), path)
    requests = [_request(request_id=f"req_{i}", nonce=f"ai-agent-{i}abc") for i in range(3)]
    recorded = [recorder.complete(r) for r in requests]
    replay = ReplayProvider(path)
    replayed = [replay.complete(r) for r in requests]
    assert [_replayable(c) for c in replayed] == [_replayable(c) for c in recorded]
    assert replay.remaining == 0


def test_recorded_script_is_id_independent(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    RecordingProvider(_ScriptedModel(), path).complete(_request(request_id="req_1", nonce="N9"))
    line = json.loads(path.read_text().splitlines()[0])
    assert (
        line["text"]
        == "<request_id>{{request_id}}</request_id>\n<{{nonce}}-0001>x</{{nonce}}-0001>"
    )
    assert line["tool_calls"] == [
        {"id": "c1", "name": "write", "arguments": {"path": "{{request_id}}.md", "n": 2}}
    ]
    # Replayed under new ids, the new ids come back.
    fresh = ReplayProvider(path).complete(_request(request_id="req_2", nonce="M1"))
    assert fresh.text == "<request_id>req_2</request_id>\n<M1-0001>x</M1-0001>"


def test_longer_value_wins_when_one_id_contains_another() -> None:
    completion = Completion(text="req_1 and req_1-n")
    record = completion_to_record(completion, {"request_id": "req_1", "nonce": "req_1-n"})
    assert record["text"] == "{{request_id}} and {{nonce}}"


def test_recording_starts_fresh_unless_appending(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    path.write_text('{"text": "stale"}\n')
    RecordingProvider(_ScriptedModel(), path).complete(_request(request_id="a", nonce="b"))
    assert len(load_script(path)) == 1
    RecordingProvider(_ScriptedModel(), path, append=True).complete(
        _request(request_id="a", nonce="b")
    )
    assert len(load_script(path)) == 2


def test_recording_never_writes_keys_or_prompts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = "sk-test-DO-NOT-LEAK-4f9a2c"
    monkeypatch.setenv("OPENAI_API_KEY", secret)
    monkeypatch.setenv("TOOLWIRE_API_KEY", secret)
    path = tmp_path / "run.jsonl"
    recorder = RecordingProvider(_ScriptedModel(), path)
    request = CompletionRequest(
        messages=[{"role": "system", "content": "PROMPT-TEXT-MARKER"}],
        variables={"request_id": "r", "nonce": "n"},
    )
    recorder.complete(request)
    written = path.read_text()
    assert secret not in written
    assert "PROMPT-TEXT-MARKER" not in written
    assert set(json.loads(written.splitlines()[0])) <= {
        "text",
        "finish_reason",
        "tool_calls",
        "input_tokens",
        "output_tokens",
        "sent",  # how the request was shaped: its constraint kind, whether tools went along
    }


def test_recorder_passes_capabilities_and_close_through(tmp_path: Path) -> None:
    inner = _ScriptedModel()
    recorder = RecordingProvider(inner, tmp_path / "r.jsonl")
    assert (recorder.name, recorder.supports_grammar) == ("fake:model", True)
    recorder.close()
    assert inner.closed


# --- registry ------------------------------------------------------------------------


def test_registry_builds_replay_relative_to_base_dir() -> None:
    cfg = SimpleNamespace(name="replay:two_turns.jsonl")
    provider = make_provider(cfg, base_dir=DATA)
    assert isinstance(provider, ReplayProvider)
    assert provider.complete(_request()).text == "first answer"


@pytest.mark.parametrize("name", ["nosuch:model", "no-colon"])
def test_registry_rejects_unknown_providers_and_lists_known_ones(name: str) -> None:
    with pytest.raises(UsageError) as info:
        make_provider(SimpleNamespace(name=name), base_dir=DATA)
    assert "llamacpp" in info.value.message and "replay" in info.value.message


def test_llamacpp_with_a_missing_gguf_is_a_usage_error(tmp_path: Path) -> None:
    cfg = SimpleNamespace(name="llamacpp:models/none.gguf", n_threads=None, seed=None)
    with pytest.raises(UsageError, match="no GGUF file at"):
        make_provider(cfg, base_dir=tmp_path)


def test_recording_is_plain_json_lines(tmp_path: Path) -> None:
    # No "//" header: jq, pandas and DuckDB's read_json read every line as JSON.
    path = tmp_path / "run.jsonl"
    recorder = RecordingProvider(_ScriptedModel(), path)
    for n in range(2):
        recorder.complete(_request(request_id=f"r{n}", nonce="n"))
    lines = path.read_text(encoding="utf-8").splitlines()
    assert len(lines) == 2
    assert all(isinstance(json.loads(line), dict) for line in lines)


# --- job lines and memory lines -----------------------------------------------------------


def _memory_request() -> CompletionRequest:
    return CompletionRequest(messages=[{"role": "user", "content": "who?"}], purpose="memory")


def test_job_and_memory_requests_each_read_only_their_own_lines() -> None:
    provider = ReplayProvider(DATA / "job_and_memory.jsonl")
    assert (provider.remaining_for("job"), provider.remaining_for("memory")) == (2, 1)
    assert provider.complete(_request()).text == "job 1"
    assert provider.complete(_request()).text == "job 2"  # the memory line is not a job's
    assert provider.complete(_memory_request()).text == '{"interests": ["cooking"]}'
    assert provider.remaining == 0


def test_a_memory_request_never_takes_a_job_line() -> None:
    provider = ReplayProvider(DATA / "two_turns.jsonl")
    assert provider.refusal(_memory_request()) is not None
    assert provider.refusal(_request()) is None
    with pytest.raises(ProviderError) as info:
        provider.complete(_memory_request())
    assert info.value.code == REPLAY_EXHAUSTED and '"for": "memory"' in info.value.message
    assert provider.remaining_for("job") == 2  # untouched
    assert provider.complete(_request()).text == "first answer"


def test_recording_marks_the_profile_steps_answers_for_memory(tmp_path: Path) -> None:
    recorded = tmp_path / "rec.jsonl"
    recorder = RecordingProvider(ReplayProvider(DATA / "job_and_memory.jsonl"), recorded)
    recorder.complete(_request())
    assert recorder.refusal(_memory_request()) is None  # forwarded: the inner has one left
    recorder.complete(_memory_request())
    assert recorder.refusal(_memory_request()) is not None  # and now it has none
    lines = [json.loads(line) for line in recorded.read_text("utf-8").splitlines()]
    assert ["for" in line for line in lines] == [False, True]
    assert lines[1]["for"] == "memory"
    replayed = ReplayProvider(recorded)
    assert replayed.remaining_for("memory") == 1 and replayed.remaining_for("job") == 1


# --- faithful replays (issue 46) ------------------------------------------------------


def test_a_recording_says_how_each_request_was_shaped_and_whose_it_was(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    recorder = RecordingProvider(_ScriptedModel(), path)
    side = CompletionRequest(
        messages=[{"role": "user", "content": "Tool:"}],
        grammar='root ::= "a"\n',
        variables={"request_id": "r", "nonce": "n"},
        purpose="first_tool",
    )
    main = CompletionRequest(
        messages=[{"role": "user", "content": "go"}],
        grammar='root ::= "b"\n',
        tools=[{"type": "function", "function": {"name": "a"}}],
        variables={"request_id": "r", "nonce": "n"},
    )
    recorder.complete(side)
    recorder.complete(main)
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert [(line.get("for"), line["sent"]) for line in lines] == [
        ("first_tool", {"constraint": "grammar", "native_tools": False}),
        (None, {"constraint": "grammar", "native_tools": True}),
    ]
    replay = ReplayProvider(path)
    assert (replay.supports_grammar, replay.supports_json_schema) == (True, False)
    assert replay.carries_native_tools is True
    # Each kind of request reads its own lines: the main request never gets the side reply.
    assert replay.complete(main).text == lines[1]["text"].replace("{{request_id}}", "r").replace(
        "{{nonce}}", "n"
    )
    assert replay.complete(side).text.startswith("<request_id>r</request_id>")


def test_a_script_without_sent_replays_unconstrained(tmp_path: Path) -> None:
    replay = ReplayProvider(DATA / "two_turns.jsonl")
    assert (replay.supports_grammar, replay.supports_json_schema) == (False, False)
    assert replay.carries_native_tools is None


@pytest.mark.parametrize(
    "sent",
    [{"constraint": "regex", "native_tools": False}, {"constraint": None}, "grammar"],
)
def test_a_malformed_sent_is_refused_with_its_line(tmp_path: Path, sent: object) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps({"text": "x", "sent": sent}) + "\n")
    with pytest.raises(UsageError, match=r"bad.jsonl:1: 'sent' is"):
        load_script(path)
