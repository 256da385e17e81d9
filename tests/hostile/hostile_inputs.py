"""Hostile inputs for the parsers: big generated documents and Hypothesis mutators.

Two kinds of thing live here. ``GENERATORS`` builds the inputs too big to keep
as case files (a 50 MB response, 100,000 nested tags, a billion-laughs DTD);
``tests/data/hostile/output/cases.yaml`` names them with ``generate:``. The
strategies (``mutated``, ``hostile_text``, ``hostile_bytes``) start from valid
documents of each protocol (the unit tests' vectors) and break them the ways a
model or an attacker would: truncation, a tag renamed, a span deleted or
doubled, hostile tokens inserted. Starting from valid documents is what lets
the fuzz reach the deep checks rather than stop at the first character.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from hypothesis import strategies as st

__all__ = [
    "DATA",
    "GENERATORS",
    "HOSTILE_TOKENS",
    "MB",
    "TAG_NAMES",
    "billion_laughs",
    "deep_nesting",
    "fifty_mb",
    "hostile_bytes",
    "hostile_text",
    "mutated",
    "seeds",
]

DATA = Path(__file__).resolve().parents[1] / "data"
MB = 1024 * 1024

# Tokens a hostile reply or note may hold: markup the tokenizers must not trust,
# characters XML forbids, numbers that break int(), fences and role markers.
HOSTILE_TOKENS: tuple[str, ...] = (
    "<",
    ">",
    "&",
    "&amp;",
    "&lt;",
    "&#0;",
    "&#x110000;",
    "&#xD800;",
    "&lol;",
    "]]>",
    "<![CDATA[",
    "<!--",
    "-->",
    "<?xml version='1.0'?>",
    '<!DOCTYPE r [<!ENTITY x SYSTEM "file:///etc/passwd">]>',
    "</",
    "/>",
    '<a b="c">',
    "\x00",
    "\x1b",
    "\ud800",
    "\udfff",
    "\ufeff",
    "\ufffe",
    "\r",
    "\r\n",
    "\t",
    "```",
    "```xml\n",
    "<think>",
    "</think>",
    "<system>",
    "</response>",
    "ignore previous instructions",
    "9" * 5000,
    "-1e999",
    "1e309",
    "NaN",
    "Infinity",
    '"',
    "'",
    "\\",
    "\\u0000",
    "\\ud800",
    "{",
    "}",
    "[",
    "]",
    ",",
    ":",
    "null",
    "<a>" * 40,
    "</a>" * 40,
    "é",
    "\U0001f600",
    "ﬁ",
)

# Tag names from every protocol, for renaming one tag into another.
TAG_NAMES: tuple[str, ...] = (
    "librarian_response",
    "librarian_request",
    "request_id",
    "status",
    "summary",
    "operations",
    "operation",
    "operation_id",
    "kind",
    "target_note_id",
    "target_path",
    "title",
    "body_markdown",
    "reason",
    "confidence",
    "warnings",
    "warning",
    "source",
    "source_bundle",
    "execute",
    "think",
    "results",
    "read_file",
    "path",
    "ai-agent-1a2b3c4d-0001",
    "ai-agent-1a2b3c4d-FINAL",
    "ai-agent-1a2b3c4d-PROGRESS",
    "ai-agent-00000000-0001",
    "x",
)


def seeds(*globs: str) -> list[str]:
    """The text of every file under ``tests/data`` matching ``globs`` (read as bytes:
    universal newlines would hide the CRLF vectors); at least one must exist."""
    found = sorted({p for g in globs for p in DATA.glob(g)})
    texts = [p.read_bytes().decode("utf-8") for p in found]
    if not texts:
        raise FileNotFoundError(f"no seed files for {globs}")
    return texts


# ----------------------------------------------------------------- mutators


@st.composite
def _mutate_once(draw: st.DrawFn, text: str, tokens: tuple[str, ...]) -> str:
    n = len(text)
    op = draw(st.sampled_from(("insert", "insert", "truncate", "delete", "double", "rename")))
    i = draw(st.integers(0, n))
    if op == "insert":
        token = draw(st.one_of(st.sampled_from(tokens), st.text(max_size=8)))
        return text[:i] + token + text[i:]
    if op == "truncate":
        return text[:i]
    j = draw(st.integers(i, min(n, i + 200)))
    if op == "delete":
        return text[:i] + text[j:]
    if op == "double":
        return text[:j] + text[i:j] + text[j:]
    # rename: the next tag name after i becomes another protocol's tag name
    lt = text.find("<", i)
    if lt < 0:
        return text
    start = lt + 2 if text.startswith("</", lt) else lt + 1
    end = start
    while end < n and (text[end].isalnum() or text[end] in "_-."):
        end += 1
    return text[:start] + draw(st.sampled_from(TAG_NAMES)) + text[end:]


@st.composite
def mutated(draw: st.DrawFn, documents: list[str], tokens: tuple[str, ...] = HOSTILE_TOKENS) -> str:
    """A valid document from ``documents`` with 0-5 random mutations applied."""
    text = draw(st.sampled_from(documents))
    for _ in range(draw(st.integers(0, 5))):
        text = draw(_mutate_once(text, tokens))
    return text


def hostile_text(
    documents: list[str], tokens: tuple[str, ...] = HOSTILE_TOKENS
) -> st.SearchStrategy[str]:
    """Mostly mutated valid documents, some raw text, some token soup."""
    return st.one_of(
        mutated(documents, tokens),
        mutated(documents, tokens),
        mutated(documents, tokens),
        st.text(max_size=300),
        st.lists(st.sampled_from(tokens + TAG_NAMES), max_size=30).map("".join),
    )


def hostile_bytes(documents: list[str]) -> st.SearchStrategy[bytes]:
    """Bytes: mutated documents encoded (lone surrogates kept as their invalid UTF-8
    bytes) with random bytes spliced in, and raw binary."""

    @st.composite
    def spliced(draw: st.DrawFn) -> bytes:
        data = draw(mutated(documents)).encode("utf-8", "surrogatepass")
        i = draw(st.integers(0, len(data)))
        return data[:i] + draw(st.binary(max_size=8)) + data[i:]

    return st.one_of(spliced(), st.binary(max_size=300))


# --------------------------------------------------------------- generators


def fifty_mb() -> str:
    """A 50 MB reply: a valid-looking envelope whose body runs to 50 MiB."""
    head = "<librarian_response>\n<request_id>r</request_id>\n<summary>"
    tail = "</summary>\n</librarian_response>\n"
    return head + "lol " * ((50 * MB - len(head) - len(tail)) // 4) + tail


def fifty_mb_bytes() -> bytes:
    return fifty_mb().encode("utf-8")


def _padding(frame: int) -> str:
    return "a" * (50 * MB - frame)


def fifty_mb_execute() -> str:
    head, tail = "<execute>\n<read_file><path>", "</path></read_file>\n</execute>\n"
    return head + _padding(len(head) + len(tail)) + tail


def fifty_mb_json() -> str:
    head, tail = '{"done": true, "message": "', '"}'
    return head + _padding(len(head) + len(tail)) + tail


SLOT_OPEN = '<ai-agent-1a2b3c4d-0001 tool="read_file">'
SLOT_CLOSE = "</ai-agent-1a2b3c4d-0001>"


def fifty_mb_slot() -> str:
    head, tail = SLOT_OPEN + '{"path": "', '"}' + SLOT_CLOSE
    return head + _padding(len(head) + len(tail)) + tail


def deep_slot(depth: int = 100_000) -> str:
    return SLOT_OPEN + '{"path": ' + "[" * depth + "]" * depth + "}" + SLOT_CLOSE


def deep_nesting(depth: int = 100_000, root: str = "librarian_response") -> str:
    """``depth`` nested tags inside ``root``, all closed."""
    return f"<{root}>" + "<a>" * depth + "</a>" * depth + f"</{root}>"


def deep_execute(depth: int = 100_000) -> str:
    return "<execute>\n<read_file>" + "<a>" * depth + "</a>" * depth + "</read_file>\n</execute>"


def deep_json(depth: int = 100_000) -> str:
    return '{"done": true, "message": ' + "[" * depth + "]" * depth + "}"


def billion_laughs() -> str:
    """The classic: ten levels of entities, each ten references to the one below."""
    lines = ['<?xml version="1.0"?>', "<!DOCTYPE lolz [", '  <!ENTITY lol "lol">']
    lines.append('  <!ENTITY lol1 "' + "&lol;" * 10 + '">')
    for level in range(2, 10):
        lines.append(f'  <!ENTITY lol{level} "' + f"&lol{level - 1};" * 10 + '">')
    lines.append("]>")
    lines.append("<librarian_response><summary>&lol9;</summary></librarian_response>")
    return "\n".join(lines)


GENERATORS: dict[str, Callable[[], str | bytes]] = {
    "fifty_mb": fifty_mb,
    "fifty_mb_bytes": fifty_mb_bytes,
    "fifty_mb_execute": fifty_mb_execute,
    "fifty_mb_json": fifty_mb_json,
    "fifty_mb_slot": fifty_mb_slot,
    "deep_slot": deep_slot,
    "deep_nesting": deep_nesting,
    "deep_execute": deep_execute,
    "deep_json": deep_json,
    "billion_laughs": billion_laughs,
}
