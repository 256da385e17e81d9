"""The librarian's ``xml_attrless`` protocol (seed 002): requests out, responses in.

``scanner``: the one tag-stack tokenizer (structure errors with line and column).
``parse``: ``parse_response`` and ``parse_request`` on it. ``render``: the
envelopes written out. ``grammar``: the GBNF of one valid response.
"""

from toolwire.protocols.attrless.grammar import (
    escape_xml_text,
    estimate_answer_tokens,
    librarian_grammar,
)
from toolwire.protocols.attrless.parse import parse_request, parse_response
from toolwire.protocols.attrless.render import (
    REQUEST_ROOT,
    RESPONSE_ROOT,
    LibrarianRequest,
    Source,
    render_request,
    render_response,
    response_to_dict,
)
from toolwire.protocols.text import escape_text, unescape_text

__all__ = [
    "REQUEST_ROOT",
    "RESPONSE_ROOT",
    "LibrarianRequest",
    "Source",
    "escape_text",
    "escape_xml_text",
    "estimate_answer_tokens",
    "librarian_grammar",
    "parse_request",
    "parse_response",
    "render_request",
    "render_response",
    "response_to_dict",
    "unescape_text",
]
