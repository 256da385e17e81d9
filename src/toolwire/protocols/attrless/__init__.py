"""The librarian's ``xml_attrless`` protocol (seed 002): requests out, responses in.

``scanner``: text to tree, the one tag-stack tokenizer (every structure error, with
line and column). ``parse``: ``parse_response`` and ``parse_request``, the semantic
checks on the tree. ``render``: the envelopes written out. ``grammar``: the GBNF of
one valid response.
"""

from toolwire.protocols.attrless import grammar, parse, render
from toolwire.protocols.attrless.grammar import *  # noqa: F403
from toolwire.protocols.attrless.parse import *  # noqa: F403
from toolwire.protocols.attrless.render import *  # noqa: F403
from toolwire.protocols.text import escape_text, unescape_text

__all__ = ["escape_text", "unescape_text", *parse.__all__, *render.__all__, *grammar.__all__]
