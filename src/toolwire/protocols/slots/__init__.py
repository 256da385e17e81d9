"""Seed 001's XML tool transport, modes ``xml`` and ``xml-final``.

``wire``: the nonce, slot names and tag codes. ``parse``: ``parse_slots``, the one
substring scanner. ``render``: XML-NEXT and XML-PAST. ``grammar``: the GBNF of one
``xml`` turn. A final report's tag is ``protocols.final_report.FinalTag``; its payload is
read by ``agent.final_report``.
"""

from toolwire.protocols.final_report import FINAL_REPORT_TOOL, FinalTag
from toolwire.protocols.slots import grammar, parse, render, wire
from toolwire.protocols.slots.grammar import *  # noqa: F403
from toolwire.protocols.slots.parse import *  # noqa: F403
from toolwire.protocols.slots.render import *  # noqa: F403
from toolwire.protocols.slots.wire import *  # noqa: F403

__all__ = [
    "FINAL_REPORT_TOOL",
    "FinalTag",
    *wire.__all__,
    *parse.__all__,
    *render.__all__,
    *grammar.__all__,
]
