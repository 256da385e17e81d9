"""librarian_grammar: what it admits and rejects, escaping, bounds; tokenize_literals.

The grammar is checked without a model: a small reader of the GBNF subset the
module emits turns it into a regex (acceptance vectors) and into a random
sampler (every sampled answer must parse with the attrless parser and stay
inside the request's ids, kinds and topics).
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass

import pytest

from toolwire.gbnf import gbnf_literal, tokenize_literals
from toolwire.protocols.attrless import (
    escape_text,
    estimate_answer_tokens,
    librarian_grammar,
    parse_response,
)

pytestmark = pytest.mark.unit

TOPICS = ["etcd", "node", "kube-state-metrics"]
KINDS = ["retag_note", "retitle_note", "defer"]


def _grammar(**overrides: object) -> str:
    args: dict[str, object] = dict(
        request_id="req_01",
        note_ids=["n1", "a&b"],
        topics=TOPICS,
        allowed_kinds=KINDS,
        max_operations=2,
    )
    args.update(overrides)
    return librarian_grammar(**args)  # type: ignore[arg-type]


# --- a reader for the GBNF subset librarian_grammar writes -------------------------------

_TOKEN = re.compile(
    r'\s*(?:(?P<lit>"(?:\\.|[^"\\])*")|(?P<cls>\[(?:\\.|[^\]\\])*\])|(?P<rep>\{\d+(?:,\d*)?\})'
    r"|(?P<name>[a-zA-Z][a-zA-Z0-9-]*)|(?P<op>[()|?*+]))"
)


@dataclass
class Node:
    kind: str  # lit | cls | ref | seq | alt | rep
    value: object = None
    children: tuple[Node, ...] = ()
    lo: int = 0
    hi: int = 0


def _literal_text(token: str) -> str:
    return token[1:-1].encode("latin-1", "backslashreplace").decode("unicode_escape")


def read_gbnf(text: str) -> dict[str, Node]:
    rules: dict[str, Node] = {}
    for line in text.strip().splitlines():
        name, _, body = line.partition(" ::= ")
        tokens = [(m.lastgroup, m.group(m.lastgroup)) for m in _TOKEN.finditer(body)]
        assert "".join(t for _, t in tokens).replace(" ", "") == body.replace(" ", ""), line
        node, pos = _alt(tokens, 0)
        assert pos == len(tokens), line
        rules[name] = node
    return rules


def _alt(tokens: list[tuple[str | None, str]], pos: int) -> tuple[Node, int]:
    options = []
    while True:
        seq, pos = _seq(tokens, pos)
        options.append(seq)
        if pos < len(tokens) and tokens[pos] == ("op", "|"):
            pos += 1
            continue
        return Node("alt", children=tuple(options)), pos


def _seq(tokens: list[tuple[str | None, str]], pos: int) -> tuple[Node, int]:
    items = []
    while pos < len(tokens) and tokens[pos] not in (("op", "|"), ("op", ")")):
        kind, tok = tokens[pos]
        if kind == "op" and tok == "(":
            item, pos = _alt(tokens, pos + 1)
            assert tokens[pos] == ("op", ")")
        elif kind == "lit":
            item = Node("lit", _literal_text(tok))
        elif kind == "cls":
            item = Node("cls", tok)
        else:
            item = Node("ref", tok)
        pos += 1
        if pos < len(tokens) and (tokens[pos][0] == "rep" or tokens[pos][1] in ("?", "*", "+")):
            q = tokens[pos][1]
            lo, hi = {"?": (0, 1), "*": (0, 8), "+": (1, 8)}.get(q, (0, 0))
            if q.startswith("{"):
                lo_s, _, hi_s = q[1:-1].partition(",")
                lo, hi = int(lo_s), int(hi_s) if hi_s else int(lo_s)
            item = Node("rep", children=(item,), lo=lo, hi=hi)
            pos += 1
        items.append(item)
    return Node("seq", children=tuple(items)), pos


def to_regex(rules: dict[str, Node], node: Node | None = None) -> str:
    node = rules["root"] if node is None else node
    if node.kind == "lit":
        return re.escape(str(node.value))
    if node.kind == "cls":
        return str(node.value)
    if node.kind == "ref":
        return "(?:" + to_regex(rules, rules[str(node.value)]) + ")"
    if node.kind == "seq":
        return "".join(to_regex(rules, c) for c in node.children)
    if node.kind == "alt":
        return "(?:" + "|".join(to_regex(rules, c) for c in node.children) + ")"
    return "(?:" + to_regex(rules, node.children[0]) + f"){{{node.lo},{node.hi}}}"


def sample(rules: dict[str, Node], rng: random.Random, node: Node | None = None) -> str:
    node = rules["root"] if node is None else node
    if node.kind == "lit":
        return str(node.value)
    if node.kind == "cls":
        chars = [chr(c) for c in range(32, 127) if re.fullmatch(str(node.value), chr(c))]
        return rng.choice(chars)
    if node.kind == "ref":
        return sample(rules, rng, rules[str(node.value)])
    if node.kind == "seq":
        return "".join(sample(rules, rng, c) for c in node.children)
    if node.kind == "alt":
        return sample(rules, rng, rng.choice(node.children))
    # Favour the bounds: the longest and shortest answers are where limits break.
    n = rng.choice([node.lo, node.hi, rng.randint(node.lo, node.hi)])
    return "".join(sample(rules, rng, node.children[0]) for _ in range(n))


# --- what the grammar admits -------------------------------------------------------------

OP_RETAG = """<operation>
<operation_id>op_1</operation_id>
<kind>retag_note</kind>
<target_note_id>n1</target_note_id>
<title>Leader election</title>
<body_markdown>etcd</body_markdown>
<reason>It is about etcd.</reason>
<confidence>0.85</confidence>
</operation>
"""
OP_RETITLE = """<operation>
<operation_id>op_2</operation_id>
<kind>retitle_note</kind>
<target_note_id>a&amp;b</target_note_id>
<title>A and B</title>
<body_markdown>-</body_markdown>
<reason>Clearer.</reason>
<confidence>1.0</confidence>
</operation>
"""


def _envelope(
    ops: str, summary: str = "One retag.", rid: str = "req_01", warnings: str = ""
) -> str:
    return (
        f"<librarian_response>\n<request_id>{rid}</request_id>\n<status>ok</status>\n"
        f"<summary>{summary}</summary>\n<operations>\n{ops}</operations>\n"
        f"<warnings>{warnings}</warnings>\n</librarian_response>"
    )


ACCEPTED = {
    "one_retag": _envelope(OP_RETAG),
    "retag_then_retitle": _envelope(OP_RETAG + OP_RETITLE),
    "two_topics": _envelope(OP_RETAG.replace(">etcd<", ">etcd\nkube-state-metrics<")),
    "confidence_zero": _envelope(OP_RETAG.replace("0.85", "0.0")),
    "defer": _envelope(OP_RETAG.replace("retag_note", "defer").replace(">etcd</body", ">-</body")),
}
REJECTED = {
    "other_request_id": _envelope(OP_RETAG, rid="req_02"),
    "no_operation": _envelope(""),
    "three_operations": _envelope(OP_RETAG + OP_RETITLE + OP_RETITLE.replace("op_2", "op_3")),
    "op_2_first": _envelope(OP_RETAG.replace("op_1", "op_2")),
    "topic_outside_taxonomy": _envelope(OP_RETAG.replace(">etcd<", ">database<")),
    "three_topics": _envelope(OP_RETAG.replace(">etcd<", ">etcd\nnode\netcd<")),
    "kind_not_allowed": _envelope(OP_RETAG.replace("retag_note", "rewrite_note")),
    "unknown_note": _envelope(OP_RETAG.replace(">n1<", ">n2<")),
    "unescaped_id": _envelope(OP_RETAG + OP_RETITLE.replace("a&amp;b", "a&b")),
    "empty_summary": _envelope(OP_RETAG, summary=""),
    "summary_with_markup": _envelope(OP_RETAG, summary="see <b>"),
    "summary_too_long": _envelope(OP_RETAG, summary="x" * 121),
    "title_starts_blank": _envelope(OP_RETAG.replace("<title>Leader", "<title> Leader")),
    "confidence_above_one": _envelope(OP_RETAG.replace("0.85", "1.5")),
    "confidence_three_digits": _envelope(OP_RETAG.replace("0.85", "0.855")),
    "retitle_with_body": _envelope(OP_RETAG + OP_RETITLE.replace(">-<", ">text<")),
    "warnings_not_empty": _envelope(OP_RETAG, warnings="careful"),
    "status_not_ok": _envelope(OP_RETAG).replace(">ok<", ">rejected<"),
    "non_ascii_reason": _envelope(OP_RETAG.replace("It is about", "Ça parle d'")),
}


@pytest.fixture(scope="module")
def regex() -> re.Pattern[str]:
    return re.compile(to_regex(read_gbnf(_grammar())), re.S)


@pytest.mark.parametrize("name", sorted(ACCEPTED))
def test_grammar_admits_valid_answers(regex: re.Pattern[str], name: str) -> None:
    text = ACCEPTED[name]
    assert regex.fullmatch(text), name
    parse_response(text)  # and the protocol parser agrees they are valid


@pytest.mark.parametrize("name", sorted(REJECTED))
def test_grammar_rejects(regex: re.Pattern[str], name: str) -> None:
    assert not regex.fullmatch(REJECTED[name])


@pytest.mark.parametrize("seed", range(40))
def test_every_sampled_answer_parses_within_the_request(seed: int) -> None:
    note_ids = ["n1", "a&b", 'say "hi"', "<x>", "dir\\name"]
    rules = read_gbnf(_grammar(note_ids=note_ids, request_id="req_&<1>"))
    text = sample(rules, random.Random(seed))
    response = parse_response(text, strict=True)
    assert response.request_id == "req_&<1>"
    assert response.status == "ok"
    assert response.warnings == ()
    assert 1 <= len(response.operations) <= 2
    for i, op in enumerate(response.operations, start=1):
        assert op.operation_id == f"op_{i}"
        assert op.kind in KINDS
        assert op.target_note_id in note_ids
        assert 0.0 <= op.confidence <= 1.0
        assert 1 <= len(op.title) <= 80
        if op.kind == "retag_note":
            lines = op.body_markdown.split("\n")
            assert 1 <= len(lines) <= 2 and set(lines) <= set(TOPICS)
        else:
            assert op.body_markdown == "-"


def test_one_operation_when_the_request_allows_one() -> None:
    gbnf = _grammar(max_operations=1)
    assert "op-2" not in gbnf and "op_2" not in gbnf


def test_never_more_than_two_operations() -> None:
    gbnf = _grammar(max_operations=12)
    assert "op_2" in gbnf and "op_3" not in gbnf


def test_enums_hold_exactly_the_request_values() -> None:
    rules = dict(line.split(" ::= ", 1) for line in _grammar().strip().splitlines())
    assert rules["note-id"] == '"n1" | "a&amp;b"'
    assert rules["topic"] == '"etcd" | "node" | "kube-state-metrics"'
    assert rules["op-fields"] == "op-retag-note | op-retitle-note | op-defer"


def test_ids_are_xml_escaped_then_gbnf_quoted() -> None:
    rules = dict(
        line.split(" ::= ", 1)
        for line in _grammar(note_ids=['q"x', "<n>&", "b\\s"]).strip().splitlines()
    )
    assert rules["note-id"] == '"q\\"x" | "&lt;n&gt;&amp;" | "b\\\\s"'


def test_create_note_gets_a_target_path_and_a_free_body() -> None:
    regex = re.compile(to_regex(read_gbnf(_grammar(allowed_kinds=["create_note"]))), re.S)
    op = (
        "<operation>\n<operation_id>op_1</operation_id>\n<kind>create_note</kind>\n"
        "<target_path>runbooks/etcd.md</target_path>\n<title>etcd</title>\n"
        "<body_markdown># etcd\nSee the leader notes.</body_markdown>\n"
        "<reason>Index.</reason>\n<confidence>0.5</confidence>\n</operation>\n"
    )
    assert regex.fullmatch(_envelope(op))
    assert not regex.fullmatch(_envelope(op.replace("etcd.md", "etcd.txt")))


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"topics": []}, "topics must not be empty"),
        ({"note_ids": []}, "note_ids must not be empty"),
        ({"allowed_kinds": []}, "allowed_kinds must not be empty"),
        ({"allowed_kinds": ["delete_note"]}, "unknown operation kinds"),
        ({"topics": ["a\nb"]}, "on one line"),
        ({"note_ids": ["  "]}, "non-blank"),
        ({"request_id": ""}, "non-blank"),
        ({"max_operations": 0}, "max_operations"),
        ({"title_max_chars": 0}, "title_max_chars"),
        ({"topics": "etcd"}, "not a string"),
    ],
)
def test_bad_inputs_raise_value_error(overrides: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        _grammar(**overrides)


def test_duplicates_are_dropped_in_order() -> None:
    rules = dict(
        line.split(" ::= ", 1)
        for line in _grammar(topics=["node", "etcd", "node"]).strip().splitlines()
    )
    assert rules["topic"] == '"node" | "etcd"'


def test_escape_and_literal_helpers() -> None:
    assert escape_text("a<b>&c") == "a&lt;b&gt;&amp;c"
    assert gbnf_literal('a"b\\c\nd\x01') == '"a\\"b\\\\c\\nd\\x01"'


# --- tokenize_literals ---------------------------------------------------------------------


def _chars(text: str) -> list[int]:
    return [ord(c) for c in text]


@pytest.mark.parametrize(
    ("gbnf", "expected"),
    [
        ('root ::= "ab"', "root ::= (<[97]> <[98]>)"),
        ('root ::= "a" x?', "root ::= <[97]> x?"),
        ('root ::= "ab"?', "root ::= (<[97]> <[98]>)?"),
        ('root ::= "\\n\\"\\\\"', "root ::= (<[10]> <[34]> <[92]>)"),
        ('root ::= "\\x41\\u00e9"', "root ::= (<[65]> <[233]>)"),
        ('root ::= ""', 'root ::= ""'),
        ('root ::= ["a-z] "b"', 'root ::= ["a-z] <[98]>'),
        ('root ::= [\\]"] "c"', 'root ::= [\\]"] <[99]>'),
        ('# say "hi"\nroot ::= <[5]> "d"', '# say "hi"\nroot ::= <[5]> <[100]>'),
    ],
)
def test_tokenize_literals_rewrites_only_string_literals(gbnf: str, expected: str) -> None:
    assert tokenize_literals(gbnf, _chars) == expected


@pytest.mark.parametrize(
    "gbnf", ['root ::= "ab', "root ::= [ab", 'root ::= "\\q"', 'root ::= "\\x4"']
)
def test_tokenize_literals_rejects_malformed_grammar(gbnf: str) -> None:
    with pytest.raises(ValueError):
        tokenize_literals(gbnf, _chars)


def test_tokenized_librarian_grammar_keeps_every_rule() -> None:
    gbnf = _grammar()
    tokenized = tokenize_literals(gbnf, _chars)
    names = [line.split(" ::= ")[0] for line in gbnf.strip().splitlines()]
    assert [line.split(" ::= ")[0] for line in tokenized.strip().splitlines()] == names
    assert '"' not in tokenized  # every literal became token refs


# --- sizing to max_tokens ------------------------------------------------------------------

RUNBOOK_TOPICS = (
    "alertmanager etcd general kube-state-metrics kubernetes node prometheus prometheus-operator"
).split()


def _runbook_grammar(max_tokens: int | None) -> str:
    return _grammar(
        request_id="req_1a2b3c4d_001",
        note_ids=["KubeStateMetricsShardingMismatch"],
        topics=RUNBOOK_TOPICS,
        max_operations=4,
        max_tokens=max_tokens,
    )


@pytest.mark.parametrize(("max_tokens", "two_ops"), [(None, True), (700, True), (256, False)])
def test_second_operation_only_when_it_fits(max_tokens: int | None, two_ops: bool) -> None:
    assert ("op_2" in _runbook_grammar(max_tokens)) is two_ops


def test_tight_budget_shortens_text_fields() -> None:
    regex = re.compile(to_regex(read_gbnf(_runbook_grammar(256))), re.S)
    op = OP_RETAG.replace(">n1<", ">KubeStateMetricsShardingMismatch<")
    ok = _envelope(op, rid="req_1a2b3c4d_001")
    assert regex.fullmatch(ok)
    assert not regex.fullmatch(ok.replace("Leader election", "L" * 60))


def test_budget_too_small_for_one_operation_is_an_error() -> None:
    with pytest.raises(ValueError, match="cannot hold one operation"):
        _runbook_grammar(120)


def test_estimate_grows_with_operations_and_text() -> None:
    args = dict(request_id="r", note_ids=["n"], topics=["t"], allowed_kinds=["retag_note"])
    one = estimate_answer_tokens(**args, n_operations=1)  # type: ignore[arg-type]
    two = estimate_answer_tokens(**args, n_operations=2)  # type: ignore[arg-type]
    short = estimate_answer_tokens(**args, n_operations=1, title_max_chars=10)  # type: ignore[arg-type]
    assert short < one < two
