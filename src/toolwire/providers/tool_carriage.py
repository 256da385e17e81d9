"""Whether a model receives provider tool definitions (imports nothing: ``spec check`` reads it).

``native`` and ``xml-final`` send tools as provider tool definitions (seed
001). Two providers drop them without a word: the in-process model
(``llamacpp:``, which sends role and content only) and llama-cpp-python's
OpenAI-compatible server (``server: llamacpp``; also with
``--chat_format chatml-function-calling``). For those the agent writes the
tools into the prompt (``toolwire.agent.transports.prompt_tools``), and
``spec check`` and ``run`` say so before the first call.
"""

from __future__ import annotations

from typing import Any

__all__ = ["PROMPT_TOOLS_TRANSPORTS", "carries_native_tools", "prompt_tools_note"]

PROMPT_TOOLS_TRANSPORTS = frozenset({"native", "xml-final"})


def carries_native_tools(model_cfg: Any) -> bool:
    """Whether the model named by ``model_cfg`` receives provider tool definitions."""
    kind, _, _ = str(getattr(model_cfg, "name", "")).partition(":")
    if kind == "llamacpp":
        return False  # in process: role + content only (providers/llamacpp.py)
    server = getattr(model_cfg, "server", "openai")
    return not (kind == "openai" and server == "llamacpp")


def prompt_tools_note(transport: str, model_cfg: Any) -> str | None:
    """One line for ``spec check`` and ``run`` when the tools travel in the prompt."""
    if transport not in PROMPT_TOOLS_TRANSPORTS or carries_native_tools(model_cfg):
        return None
    where = (
        "the in-process model takes no tool definitions"
        if str(model_cfg.name).startswith("llamacpp:")
        else "llama-cpp-python's server (server: llamacpp) drops tool definitions"
    )
    return (
        f"{transport} with {model_cfg.name}: {where}, so the tools are written into the "
        "prompt and read back from <tool_call> text (xml, execute and xct need no native tools)"
    )
