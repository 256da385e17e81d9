"""The agent prompt pack: one stage per transport plus ``repair``, rendered for a run.

Stage ``<transport>`` (``xml-final`` -> ``xml_final``) opens the conversation:
its system prompt frames the transport, its user template takes ``{{goal}}``
and, except ``native``, ``{{protocol}}`` (the instructions the protocol module
renders from the tool schemas). Stage ``repair`` takes ``{{errors}}``: its
user template is the message that tells the model what was wrong with its
last answer (its system prompt is not sent: the conversation already has one).
"""

from __future__ import annotations

from pathlib import Path

from toolwire.domain import Message
from toolwire.errors import PackError
from toolwire.promptpack.pack import PromptPack, load_pack, render_stage, render_template

__all__ = ["AGENT_PROTOCOL", "load_agent_pack", "opening_messages", "render_repair", "stage_for"]

AGENT_PROTOCOL = "agent"


def load_agent_pack(path: str | Path) -> PromptPack:
    """Load a prompt pack for an agent run; PackError if it is not an agent pack."""
    pack = load_pack(path)
    if pack.protocol != AGENT_PROTOCOL:
        raise PackError(
            f"{path}: a tool agent needs a pack with protocol {AGENT_PROTOCOL!r} "
            f"(this one is {pack.protocol!r}); see the shipped pack 'agent'"
        )
    return pack


def stage_for(transport: str) -> str:
    """The opening stage of ``transport`` (stage names are lower_snake_case)."""
    return transport.replace("-", "_")


def opening_messages(
    pack: PromptPack, transport: str, *, goal: str, protocol: str
) -> list[Message]:
    """System + first user message for a run over ``transport``."""
    stage = stage_for(transport)
    found = pack.stages.get(stage)
    bindings = {"goal": goal}
    if found is not None and "protocol" in found.input_bindings:
        bindings["protocol"] = protocol
    return render_stage(pack, stage, bindings)  # PackError when the stage is missing


def render_repair(pack: PromptPack, errors: str) -> str:
    """The user text that reports ``errors`` back to the model."""
    return render_template(pack.stages["repair"].user_prompt_template, {"errors": errors})
