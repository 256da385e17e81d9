"""The llama.cpp model in a process of its own: the child side of ``providers.llamacpp``.

llama.cpp is C++ that parses grammars and runs CPU kernels picked at build time; when it
crashes (a SIGSEGV in a CPU kernel it should not have used, a grammar it accepts and then
trips on) it takes its process with it. So the model never lives in the process that
holds the run, the store and the journal: ``python -m toolwire.providers.llama_worker FD``
loads one GGUF and answers requests on a socket (``multiprocessing.connection`` framing,
pickled tuples). The parent sees a crash as the socket closing and ends the run
``Failed`` with ``LLM_PROVIDER_CRASHED``; the next request starts a fresh worker.

Requests are ``(op, kwargs)``; answers ``("ok", value)`` or ``("error", kind, message)``
with kind ``usage`` (a bad model file) or ``provider`` (llama.cpp refused the call).
"""

from __future__ import annotations

import ctypes
import os
import signal
import socket
import sys
import tempfile
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from toolwire.gbnf import gbnf_literal, tokenize_literals
from toolwire.providers.llamacpp import resolve_model_path

GRAMMAR_CACHE_SIZE = 64
# Tests set this to a request kind ("chat", "fill", "tokenize") or "load" to make the worker die by
# SIGSEGV on it, exactly as a crashing llama.cpp kernel would.
CRASH_ON = "TOOLWIRE_LLAMA_WORKER_CRASH_ON"


class _Refused(Exception):
    """llama.cpp refused a request: sent to the parent as a ProviderError."""


class LoadedModel:
    """One ``Llama``, its chat formatter and its compiled grammars."""

    def __init__(self, path: str, n_ctx: int, n_threads: int, seed: int) -> None:
        import llama_cpp

        _silence_llama_logs(llama_cpp)
        self.seed = seed
        self.llama = llama_cpp.Llama(
            model_path=path, n_ctx=n_ctx, n_threads=n_threads, seed=seed, verbose=False
        )
        self.grammars: OrderedDict[tuple[str, bool], Any] = OrderedDict()
        self.formatter: Any = None  # the GGUF's chat template, built on first use

    def tokenize(self, text: str) -> list[int]:
        return list(self.llama.tokenize(text.encode("utf-8"), add_bos=False, special=False))

    def n_params(self) -> int:
        return int(self.llama._model.n_params())

    def chat_prompt(self, messages: list[dict[str, str]]) -> str:
        """``messages`` in the model's own chat template, ready for the answer."""
        from llama_cpp.llama_chat_format import Jinja2ChatFormatter

        if self.formatter is None:
            template = self.llama.metadata.get("tokenizer.chat_template")
            if not template:
                raise _Refused("the GGUF file has no chat template")
            vocab = self.llama
            self.formatter = Jinja2ChatFormatter(
                template=template,
                eos_token=vocab.detokenize([vocab.token_eos()]).decode("utf-8", "replace"),
                bos_token=vocab.detokenize([vocab.token_bos()]).decode("utf-8", "replace"),
            )
        return str(self.formatter(messages=messages).prompt)

    def grammar(self, gbnf: str, token_literals: bool) -> Any:
        """A checked ``LlamaGrammar`` for ``gbnf`` (LRU-cached)."""
        key = (gbnf, token_literals)
        cached = self.grammars.get(key)
        if cached is not None:
            self.grammars.move_to_end(key)
            return cached
        from llama_cpp import LlamaGrammar

        try:
            text = tokenize_literals(gbnf, self.tokenize) if token_literals else gbnf
        except ValueError as exc:
            raise _Refused(f"malformed grammar: {exc}") from None
        _check_grammar(self.llama, text)
        compiled = LlamaGrammar.from_string(text, verbose=False)
        self.grammars[key] = compiled
        if len(self.grammars) > GRAMMAR_CACHE_SIZE:
            self.grammars.popitem(last=False)
        return compiled

    def generate(self, fn: Any, **kwargs: Any) -> Any:
        """One generation with the worker's seed; llama.cpp's errors as refusals."""
        try:
            # The chat handler defaults to repeat_penalty 1.1, which penalises the tokens
            # the prompt just listed: exactly the taxonomy the model must pick from.
            return fn(seed=self.seed, repeat_penalty=1.0, **kwargs)
        except Exception as exc:  # llama.cpp raises ValueError/RuntimeError freely
            raise _Refused(f"llama.cpp failed: {exc}") from exc

    def chat(
        self,
        messages: list[dict[str, str]],
        temperature: float,
        max_tokens: int,
        grammar: tuple[str, bool] | None,
        response_format: dict[str, Any] | None,
    ) -> dict[str, Any]:
        extra: dict[str, Any] = {}
        if response_format is not None:
            extra["response_format"] = response_format
        return dict(
            self.generate(
                self.llama.create_chat_completion,
                messages=messages,
                temperature=temperature,
                max_tokens=max_tokens,
                grammar=self.grammar(*grammar) if grammar else None,
                **extra,
            )
        )

    def fill(
        self, messages: list[dict[str, str]], template: tuple[Any, ...], temperature: float
    ) -> tuple[str, int, int, bool]:
        """Jump-forward decoding of an answer template: literal text is prompt (llama.cpp
        reuses the KV cache of the longest shared prefix), only the slots are sampled,
        each under its own grammar. Returns the answer, token counts and whether a slot
        was cut at its token limit."""
        prompt = self.chat_prompt(messages)
        answer = ""
        input_tokens = output_tokens = 0
        cut = False
        for part in template:
            if isinstance(part, str):
                answer += part
                continue
            end = f" {gbnf_literal(part.end)}" if part.end else ""
            out = self.generate(
                self.llama.create_completion,
                prompt=prompt + answer,
                temperature=temperature,
                max_tokens=part.max_tokens,
                grammar=self.grammar(f"root ::= ({part.gbnf}){end}\n", False),
            )
            usage = out.get("usage") or {}
            input_tokens += int(usage.get("prompt_tokens") or 0)
            output_tokens += int(usage.get("completion_tokens") or 0)
            written = out["choices"][0].get("text") or ""
            if part.end and not written.endswith(part.end):  # cut at max_tokens
                cut = True
                written = _without_partial_end(written, part.end) + part.end
            answer += written
        return answer, input_tokens, output_tokens, cut


def _without_partial_end(text: str, end: str) -> str:
    """``text`` without a trailing start of ``end``: a slot cut inside ``</title>``
    wrote ``</`` already, and must not keep it before the end tag is appended."""
    for size in range(min(len(end) - 1, len(text)), 0, -1):
        if text.endswith(end[:size]):
            return text[:-size]
    return text


_LOG_CALLBACK: Any = None  # kept referenced: llama.cpp holds a raw pointer to it


def _silence_llama_logs(llama_cpp: Any) -> None:
    """Route llama.cpp's own log lines nowhere (they would go to stderr)."""
    global _LOG_CALLBACK
    if _LOG_CALLBACK is None:
        _LOG_CALLBACK = llama_cpp.llama_log_callback(lambda level, text, user_data: None)
        llama_cpp.llama_log_set(_LOG_CALLBACK, ctypes.c_void_p(0))


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
    """Refuse ``text`` if llama.cpp cannot parse it.

    llama-cpp-python does not check a grammar before sampling, and a grammar llama.cpp
    rejects crashes the process (a NULL sampler): so build one here first.
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
        raise _Refused(f"llama.cpp rejected the grammar: {detail or 'parse error'}")
    llama_cpp.llama_sampler_free(sampler)


def _answer(model: LoadedModel, op: str, kwargs: dict[str, Any]) -> Any:
    if op == "tokenize":
        return model.tokenize(kwargs["text"])
    if op == "compile_grammar":
        model.grammar(kwargs["gbnf"], kwargs["token_literals"])
        return None
    if op == "chat":
        return model.chat(**kwargs)
    if op == "fill":
        return model.fill(**kwargs)
    raise _Refused(f"unknown worker request {op!r}")


def serve(conn: Connection, path: str, n_ctx: int, n_threads: int, seed: int) -> None:
    """Load the model, say ready (with its parameter count), answer until EOF."""
    if os.environ.get(CRASH_ON) == "load":  # fault injection: llama.cpp dies loading
        os.kill(os.getpid(), signal.SIGSEGV)
    try:
        model = LoadedModel(path, n_ctx, n_threads, seed)
    except Exception as exc:  # llama.cpp reports a bad file as ValueError/RuntimeError
        conn.send(("error", "usage", f"llama.cpp could not load {path}: {exc}"))
        return
    conn.send(("ok", model.n_params()))
    while True:
        try:
            op, kwargs = conn.recv()
        except (EOFError, OSError):  # the parent went away: so do we
            return
        if op == os.environ.get(CRASH_ON):  # fault injection: a segfault inside llama.cpp
            os.kill(os.getpid(), signal.SIGSEGV)
        try:
            reply: tuple[Any, ...] = ("ok", _answer(model, op, kwargs))
        except _Refused as exc:
            reply = ("error", "provider", str(exc))
        conn.send(reply)


def probe(path: str) -> int:
    """The install's proof that this build runs on this CPU: load the model and decode
    a few tokens. A build with kernels this CPU cannot run dies here (by a signal),
    in a process of its own, instead of in a user's first run."""
    import llama_cpp

    model = LoadedModel(path, 256, 1, 0)
    out = model.generate(
        model.llama.create_completion, prompt="The capital of France is", max_tokens=4
    )
    info = llama_cpp.llama_print_system_info().decode("utf-8", "replace")
    print(f"probe ok: {out['usage']['completion_tokens']} tokens decoded; {info.strip()}")
    return 0


def main(argv: list[str]) -> int:
    if argv[:1] == ["--probe"]:
        return probe(str(resolve_model_path("smollm2-135m", Path.cwd())))
    fd, path, n_ctx, n_threads, seed = argv
    sock = socket.socket(fileno=int(fd))
    conn = Connection(sock.detach())
    serve(conn, path, int(n_ctx), int(n_threads), int(seed))
    conn.close()
    # Skip interpreter teardown: Llama.__del__ after llama_cpp's globals are gone prints
    # "TypeError: 'NoneType' object is not callable", and the OS frees the model anyway.
    os._exit(0)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
