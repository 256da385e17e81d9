"""A run never learns from its own guesses (issue 41): an unchanged vault run twice.

Real parts: the bundled e5 scorer, a real store, the journal, replayed model turns (the
scorer plans every operation). The first run applies some topics and defers other notes;
the second run, with nothing changed by anyone, must apply nothing: the topics the first
run wrote are kept but are not the user's examples, so every deferred note is judged
exactly as before. An answer in `toolwire review`, or the user's own edit, makes a topic
theirs.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from toolwire.librarian.job import prepare_run, run_librarian
from toolwire.librarian.judge.scorer import NoteJudgement

pytestmark = pytest.mark.local

REPO = Path(__file__).resolve().parents[2]

TAGGED = {
    "pg-vacuum.md": ("databases", "VACUUM reclaims space held by dead tuples in Postgres."),
    "sqlite-index.md": ("databases", "A covering index answers a SQL query from the index."),
    "dns.md": ("networking", "dig +trace follows a DNS name from the root servers down."),
    "wireguard.md": ("networking", "WireGuard peers route AllowedIPs through the VPN tunnel."),
    "ssh.md": ("security", "Use ed25519 SSH keys with a passphrase; rotate leaked secrets."),
    "tls.md": ("security", "Renew TLS certificates before they expire; pin the CA."),
    "lisbon.md": ("travel", "Lisbon trip: train from Porto, hotel in Alfama, tram 28."),
    "packing.md": ("travel", "Packing list for a week away: passport, adapters, shoes."),
}
UNTAGGED = {
    "query-plans.md": "Reading Postgres query plans: index scans, join order, ANALYZE the "
    "tables when the SQL planner misjudges row counts.",
    "tcp.md": "TCP retransmissions and the DNS resolver timeouts behind slow connections "
    "between two machines on the network.",
    "certs.md": "Certificates for TLS: how the chain of trust is checked, and keeping SSH "
    "and API secrets out of the repository.",
    "kyoto.md": "Kyoto trip itinerary: the Shinkansen from Tokyo, temples to visit, a ryokan "
    "for two nights.",
    # Nothing in these is any topic: deferred, whatever the scorer thinks of the others.
    "chores.md": "Buy milk and eggs. Call the plumber about the kitchen sink.",
    "scratch.md": "Things to sort out: the printer on floor 2 is out of toner again.",
    "mixed.md": "The hotel wifi blocked the VPN, so the database backups to the office "
    "failed while I was away.",
}
EMPTY = (
    "<librarian_response>\n<request_id>{{request_id}}</request_id>\n<status>ok</status>\n"
    "<summary>-</summary>\n<operations>\n</operations>\n<warnings></warnings>\n"
    "</librarian_response>"
)


def _vault(tmp: Path) -> Path:
    root = tmp / "vault"
    root.mkdir()
    for name, (topic, text) in TAGGED.items():
        (root / name).write_text(f"---\ntopic: {topic}\n---\n{text}\n", encoding="utf-8")
    for name, text in UNTAGGED.items():
        (root / name).write_text(text + "\n", encoding="utf-8")
    return root


def _spec(tmp: Path, min_confidence: float) -> Path:
    script = tmp / "script.jsonl"
    script.write_text((json.dumps({"text": EMPTY}) + "\n") * 40, encoding="utf-8")
    spec = tmp / "spec.yaml"
    spec.write_text(
        f"""name: own-guesses
version: "1"
transport: xml_attrless
model: replay:script.jsonl
prompt_pack: {REPO / "src" / "toolwire" / "prompt_packs" / "librarian-small"}
taxonomy:
  topics: [databases, networking, security, travel]
  descriptions:
    databases: storing and querying data; SQL, indexes, query tuning
    networking: how machines talk; DNS, TCP, VPNs, routing
    security: keeping systems safe; TLS, certificates, SSH, secrets
    travel: trips, itineraries, transport, packing and places to visit
judgement:
  decide: scorer
  embedder: e5-small
  write_titles: false
constraints:
  batch_size: 50
  max_operations: 50
  min_confidence: {min_confidence}
  allowed_kinds: [retag_note, defer]
  context_window_tokens: 100000
memory:
  synthesis: "off"
""",
        encoding="utf-8",
    )
    return spec


def _run(spec: Path, vault: Path, db: Path) -> dict[str, NoteJudgement]:
    ctx = prepare_run(spec, workspace=vault, db=db)
    result = run_librarian(ctx)
    assert result.ok, (result.error_code, result.error_message)
    return ctx.judgements


def _bytes(vault: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in vault.glob("*.md")}


def test_an_unchanged_vault_run_twice_applies_nothing_the_second_time(tmp_path: Path) -> None:
    vault, db = _vault(tmp_path), tmp_path / "s.duckdb"
    spec = _spec(tmp_path, 0.5)
    first = _run(spec, vault, db)
    applied = sorted(n for n, j in first.items() if j.decision == "retag")
    deferred = sorted(n for n, j in first.items() if j.decision == "defer")
    # The premise: the first run both applied and deferred (else this pins nothing).
    assert applied and deferred, {n: (j.decision, j.why) for n, j in first.items()}
    after_first = _bytes(vault)

    second = _run(spec, vault, db)
    assert [n for n, j in second.items() if j.decision == "retag"] == []
    assert _bytes(vault) == after_first  # nothing written
    for n in applied:  # kept, and still the run's word, not an example
        assert second[n].decision == "keep" and second[n].topic == first[n].topic
    for n in deferred:  # judged exactly as before: the first run's tags taught nothing
        assert second[n].decision == "defer"
        assert second[n].candidates == first[n].candidates


def test_a_run_with_no_user_evidence_asks_before_it_applies(tmp_path: Path) -> None:
    vault, db = tmp_path / "vault", tmp_path / "s.duckdb"
    vault.mkdir()
    for name, text in {**{n: t for n, (_, t) in TAGGED.items()}, **UNTAGGED}.items():
        (vault / name).write_text(text + "\n", encoding="utf-8")
    before = _bytes(vault)
    judged = _run(_spec(tmp_path, 0.5), vault, db)
    assert {j.decision for j in judged.values()} == {"defer"}
    assert _bytes(vault) == before
    # The first questions cover every topic: the four first asked lean to four topics.
    first_asked = sorted(judged.values(), key=lambda j: j.ask_rank)[:4]
    assert {j.best.topic for j in first_asked} == {"databases", "networking", "security", "travel"}
