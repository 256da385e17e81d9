"""Which title the scorer reads (decisions.scorer_title): not the one toolwire writes
from the file name, so that write does not change the note's embedded text (issue 43)."""

from __future__ import annotations

import pytest

from toolwire.librarian.decisions import scorer_title
from toolwire.librarian.notes.workspace import Note

pytestmark = pytest.mark.unit

BODY = "WireGuard tunnel: peers, AllowedIPs, keepalive and routing through the VPN.\n"


def _note(path: str, title: str, body: str = BODY) -> Note:
    return Note("n", path, title, (), None, {}, body, b"", "sha")


@pytest.mark.parametrize(
    ("path", "title", "read"),
    [
        ("net/wireguard-tunnel.md", "Wireguard tunnel", ""),  # toolwire's own: not read
        ("net/wireguard-tunnel.md", "Tunnel to the office", "Tunnel to the office"),
        ("net/vpn.md", "Vpn", ""),
        ("net/office-printer.md", "Office printer", "Office printer"),  # not grounded
        ("net/vpn.md", "", ""),
    ],
)
def test_the_scorer_reads_the_users_title_only(path: str, title: str, read: str) -> None:
    assert scorer_title(_note(path, title)) == read
