"""The ``openai:`` provider against a real OpenAI-compatible HTTP server, not a mock.

A module-scoped fixture starts llama-cpp-python's server (``python -m
llama_cpp.server``) on 127.0.0.1 with the bundled SmolLM2-135M GGUF; the
kill-mid-run test starts its own, because it kills it.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from llama_server import LlamaServer, free_port, start_llama_server

from toolwire.domain import Completion, CompletionRequest
from toolwire.errors import (
    LLM_PROVIDER_ERROR,
    LLM_PROVIDER_TIMEOUT,
    LLM_PROVIDER_UNREACHABLE,
    ProviderError,
    ProviderTimeout,
    ProviderUnreachable,
)
from toolwire.providers.openai_compat import OpenAIProvider

pytestmark = pytest.mark.local

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlamaServer]:
    running = start_llama_server(tmp_path_factory.mktemp("llama_server"))
    try:
        yield running
    finally:
        running.stop()


def _provider(base_url: str, **kwargs: Any) -> OpenAIProvider:
    return OpenAIProvider("smollm2", base_url=base_url, server="llamacpp", **kwargs)


def _ask(content: str, *, grammar: str | None = None, max_tokens: int = 24) -> CompletionRequest:
    return CompletionRequest(
        messages=[{"role": "user", "content": content}],
        temperature=0.0,
        max_tokens=max_tokens,
        grammar=grammar,
    )


def test_plain_completion_returns_text_usage_and_finish_reason(server: LlamaServer) -> None:
    provider = _provider(server.base_url)
    try:
        completion = provider.complete(_ask("Name one colour of the sky.", max_tokens=12))
    finally:
        provider.close()
    assert completion.text.strip()
    assert completion.input_tokens is not None and completion.input_tokens > 0
    assert completion.output_tokens is not None and 0 < completion.output_tokens <= 12
    assert completion.finish_reason in ("stop", "length")
    assert completion.latency_ms > 0


def test_grammar_travels_and_constrains_the_answer(server: LlamaServer) -> None:
    provider = _provider(server.base_url)
    # Asked for prose; only the grammar can force the answer to one bare word.
    question = "Write a long friendly paragraph about whether the sky is blue."
    try:
        completion = provider.complete(_ask(question, grammar='root ::= "yes" | "no"'))
    finally:
        provider.close()
    assert completion.text in ("yes", "no")
    assert completion.finish_reason == "stop"


def test_nothing_listening_is_unreachable_with_the_base_url() -> None:
    base_url = f"http://127.0.0.1:{free_port()}/v1"
    provider = _provider(base_url, timeout_s=10)
    try:
        with pytest.raises(ProviderUnreachable) as info:
            provider.complete(_ask("hello"))
    finally:
        provider.close()
    assert info.value.code == LLM_PROVIDER_UNREACHABLE
    assert base_url in info.value.message
    assert info.value.transient is False


def test_one_millisecond_timeout_is_provider_timeout(server: LlamaServer) -> None:
    # Generating 64 tokens takes the 135M model on this CPU about a second; a
    # 1 ms budget cannot be met (and if connecting alone takes longer, that
    # is a timeout too).
    provider = _provider(server.base_url, timeout_s=0.001)
    try:
        with pytest.raises(ProviderTimeout) as info:
            provider.complete(_ask("Count from one to fifty in words.", max_tokens=64))
    finally:
        provider.close()
    assert info.value.code == LLM_PROVIDER_TIMEOUT
    assert info.value.transient is True


def test_unknown_route_is_terminal_404(server: LlamaServer) -> None:
    provider = _provider(f"{server.root_url}/no-such-api")
    try:
        with pytest.raises(ProviderError) as info:
            provider.complete(_ask("hello"))
    finally:
        provider.close()
    error = info.value
    assert (error.code, error.status_code, error.transient) == (LLM_PROVIDER_ERROR, 404, False)
    assert "Not Found" in error.message


def test_prompt_over_the_context_window_is_terminal_400_with_the_servers_message(
    server: LlamaServer,
) -> None:
    provider = _provider(server.base_url)
    try:
        with pytest.raises(ProviderError) as info:
            provider.complete(_ask("word " * 5000, max_tokens=16))
    finally:
        provider.close()
    error = info.value
    assert (error.code, error.status_code, error.transient) == (LLM_PROVIDER_ERROR, 400, False)
    assert "maximum context length is 4096 tokens" in error.message


# --- The librarian end to end through openai: ----------------------------------------------

NOTES = {
    "pg-vacuum.md": "---\ntitle: Postgres VACUUM\n---\n# Postgres VACUUM\n\n"
    "VACUUM reclaims space held by dead tuples in a Postgres database table.\n",
    "sourdough.md": "# Sourdough starter\n\n"
    "Feed the starter twice a day with equal flour and water, then bake the bread.\n",
    "lisbon.md": "Trip to Lisbon: book the flight and hotel, ride tram 28, visit Belem.\n",
}

SPEC = """name: librarian-openai-test
version: "1"
transport: xml_attrless
model:
  name: "openai:smollm2"
  server: llamacpp
  constrain: grammar
  temperature: 0.0
  max_tokens: 256
prompt_pack: {pack}
taxonomy:
  topics: [databases, networking, security, observability, cooking, travel, finance, reading]
constraints:
  strict_mode: false
  max_operations: 4
  batch_size: 1
  max_repair_retries: 2
  min_confidence: 0.3
  allowed_kinds: [retag_note, retitle_note, defer]
  context_window_tokens: 8192
"""


def _workspace(root: Path) -> Path:
    notes = root / "notes"
    notes.mkdir(parents=True)
    for name, text in NOTES.items():
        (notes / name).write_text(text, encoding="utf-8")
    return notes


def _spec(root: Path) -> Path:
    path = root / "librarian.yaml"
    path.write_text(
        SPEC.format(pack=REPO / "src" / "toolwire" / "prompt_packs" / "librarian-small"),
        encoding="utf-8",
    )
    return path


def _note_bytes(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in sorted(root.rglob("*.md"))
        if ".toolwire" not in p.parts
    }


@pytest.fixture
def openai_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    """No developer settings leak in: no real key goes to the local server, no model override."""
    for name in (
        "OPENAI_API_KEY",
        "TOOLWIRE_OPENAI_API_KEY",
        "TOOLWIRE_MODEL",
        "TOOLWIRE_TRANSPORT",
        "TOOLWIRE_DB",
    ):
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def test_librarian_runs_end_to_end_through_openai_with_grammar(
    server: LlamaServer, openai_env: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from toolwire.librarian.job import prepare_run, run_librarian

    openai_env.setenv("TOOLWIRE_OPENAI_BASE_URL", server.base_url)
    workspace = _workspace(tmp_path)
    ctx = prepare_run(
        _spec(tmp_path), workspace=workspace, db=tmp_path / "store.duckdb", model="openai:smollm2"
    )
    try:
        assert ctx.provider.supports_grammar is True
        result = run_librarian(ctx)
    finally:
        ctx.provider.close()
    assert result.status == "ok", result.error_message
    assert result.turns == len(NOTES)
    _, rows = ctx.store.query(
        "select kind, parse_ok, input_tokens, output_tokens, finish_reason "
        "from attempts where run_id = ? order by turn, attempt",
        [result.run_id],
    )
    assert len(rows) == len(NOTES)  # one attempt per note: zero repairs
    assert all(kind == "initial" and parse_ok for kind, parse_ok, *_ in rows)
    assert all(inp > 0 and out > 0 and reason == "stop" for _, _, inp, out, reason in rows)
    _, run = ctx.store.query(
        "select status, error_code, provider, model from runs where run_id = ?", [result.run_id]
    )
    assert run == [("ok", None, "openai", "smollm2")]


# --- An xct agent constrained by the decision's JSON Schema (issue 19, item 7) --------------


@pytest.mark.parametrize("constrain", ["json_schema", "grammar"])
def test_xct_agent_replies_are_decisions_under_a_schema_or_a_grammar(
    constrain: str, server: LlamaServer, openai_env: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The bundled 135M model through llama-cpp-python's server, constrained by the
    decision's JSON Schema (``response_format: json_object + schema``) or by the GBNF
    grammar: every finished reply is one valid decision, the first one included.
    (Unconstrained, its first reply to this prompt is prose: it repeats the task.)"""
    import shutil

    from toolwire.agent import prepare_agent_run, run_agent

    text = (REPO / "specs" / "agent-xct.yaml").read_text("utf-8")
    spec = tmp_path / "agent-xct.yaml"
    spec.write_text(
        text.replace("max_iterations: 12", "max_iterations: 2").replace(
            "constrain: grammar", f"constrain: {constrain}\n  server: llamacpp"
        ),
        encoding="utf-8",
    )
    openai_env.setenv("TOOLWIRE_OPENAI_BASE_URL", server.base_url)
    workspace = Path(shutil.copytree(REPO / "tests" / "data" / "tools" / "scratch", tmp_path / "w"))
    ctx = prepare_agent_run(
        spec, workspace=workspace, db=tmp_path / "store.duckdb", model="openai:smollm2"
    )
    try:
        assert ctx.constraint == constrain
        run_agent(ctx)
    finally:
        ctx.provider.close()
    # The transport's own replies (under a grammar the first-tool side request comes
    # first, attempt -1: its reply is a tool name, not a decision).
    _, rows = ctx.store.query(
        "select turn, attempt, parse_ok, finish_reason from attempts "
        "where kind <> 'first_tool' order by turn, attempt"
    )
    assert rows and rows[0][:3] == (0, 0, True)  # a valid decision at the first try
    assert all(ok for _, _, ok, finish in rows if finish == "stop")
    _, calls = ctx.store.query("select source, status from tool_calls")
    assert calls and all(source == "json" and status != "invalid" for source, status in calls)


def test_killing_the_server_mid_run_fails_unreachable_and_leaves_notes_intact(
    openai_env: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from toolwire.librarian.job import prepare_run, run_librarian

    own = start_llama_server(tmp_path)
    try:
        openai_env.setenv("TOOLWIRE_OPENAI_BASE_URL", own.base_url)
        workspace = _workspace(tmp_path)
        before = _note_bytes(workspace)
        db = tmp_path / "store.duckdb"
        ctx = prepare_run(_spec(tmp_path), workspace=workspace, db=db, model="openai:smollm2")
        texts: list[str] = []

        def complete_then_kill(request: CompletionRequest) -> Completion:
            # The real provider every time; after the first answer the server
            # dies, so the next call meets a closed port.
            completion = ctx.provider.complete(request)
            texts.append(completion.text)
            own.stop()
            return completion

        try:
            result = run_librarian(ctx, call=complete_then_kill)
        finally:
            ctx.provider.close()
    finally:
        own.stop()

    assert not own.is_running()
    assert len(texts) == 1
    assert result.status == "Failed"
    assert result.error_code == LLM_PROVIDER_UNREACHABLE
    assert own.base_url in (result.error_message or "")
    _, run = ctx.store.query(
        "select status, error_code from runs where run_id = ?", [result.run_id]
    )
    assert run == [("Failed", LLM_PROVIDER_UNREACHABLE)]
    _, attempts = ctx.store.query(
        "select raw_text from attempts where run_id = ? order by turn, attempt", [result.run_id]
    )
    assert [row[0] for row in attempts] == texts  # the one answer made before the kill
    # A Failed run applies nothing: every note is byte-for-byte the original.
    assert _note_bytes(workspace) == before
