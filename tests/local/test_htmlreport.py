"""The HTML report: self-contained, escaped, with its charts, and rendered by headless Chromium.

The structural checks (lxml) always run. When /usr/bin/chromium exists the
page is also rendered headless: its DOM must hold the same charts, and the
screenshot must show the bar colours (pixels decoded here, no image library).
"""

from __future__ import annotations

import shutil
import struct
import subprocess
import sys
import zlib
from pathlib import Path

import pytest
from lxml import html as lxml_html
from test_batch import AGENT_SPEC, SCRATCH, librarian_inputs, write_script
from test_librarian_replay import MALFORMED, VALID

pytestmark = pytest.mark.local

REPO = Path(__file__).resolve().parents[2]
CHROMIUM = Path("/usr/bin/chromium")
BAR_COLOURS = {(0x3B, 0x6F, 0xB6), (0xE0, 0x8A, 0x2E)}  # htmlreport's first two series
# Model text that must come out as text, never as markup.
HOSTILE = VALID.replace(
    "The note is about baking bread.", "&lt;script&gt;alert(1)&lt;/script&gt; bread"
)


@pytest.fixture(scope="module")
def batch_store(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    """Batch 'h': librarian runs (first try, repaired, hostile, Failed) and an agent run."""
    from toolwire.batch import BatchItem, BatchShared, execute_item, plan_batch

    tmp = tmp_path_factory.mktemp("report")
    db = tmp / "report.duckdb"
    spec, (ws,), good, repair = librarian_inputs(tmp, 1)
    hostile = write_script(tmp / "hostile.jsonl", [HOSTILE])
    failing = write_script(tmp / "failing.jsonl", [MALFORMED] * 3)
    shared = BatchShared(str(spec), str(db), "h", dry_run=True)
    items = plan_batch([ws], [good, repair, hostile, failing])
    outcomes = [execute_item(item, shared) for item in items]
    scratch = tmp / "scratch"
    shutil.copytree(SCRATCH, scratch)
    model = f"replay:{REPO / 'tests' / 'data' / 'replay' / 'agent-native.jsonl'}"
    agent = BatchItem(9, str(scratch), model, "native")
    outcomes.append(execute_item(agent, BatchShared(str(AGENT_SPEC), str(db), "h")))
    assert [o["status"] for o in outcomes] == ["ok", "ok", "ok", "Failed", "ok"], outcomes
    return db, [o["run_id"] for o in outcomes]


def _bars(doc: lxml_html.HtmlElement, chart: str) -> int:
    return len(doc.xpath(f'//svg[@id="{chart}"]//rect[@class="bar"]'))


def test_batch_page_has_runs_charts_and_diffs(batch_store: tuple[Path, list[str]]) -> None:
    from toolwire.htmlreport import write_html_report
    from toolwire.store import Store

    db, run_ids = batch_store
    out = write_html_report(Store(db), db.parent / "out" / "batch.html", batch_id="h")
    page = out.read_text(encoding="utf-8")
    doc = lxml_html.fromstring(page)
    assert doc.findtext(".//title") == "toolwire report: batch h (5 runs)"
    charts = doc.xpath('//svg[@class="chart"]/@id')
    assert charts == ["chart-repair", "chart-latency", "chart-tools"]
    # 5 model/transport groups x 2 series (librarian: 4 scripts; agent: 1).
    assert _bars(doc, "chart-repair") == 10 and _bars(doc, "chart-latency") == 10
    labels = doc.xpath('//svg[@id="chart-repair"]/text[@class="cl"]/title/text()')
    assert "replay:repair.jsonl / xml_attrless" in labels
    assert "replay:agent-native.jsonl / native" in labels
    tools = doc.xpath('//svg[@id="chart-tools"]/text[@class="cl"]/title/text()')
    assert tools and _bars(doc, "chart-tools") == 2 * len(tools)
    assert any(t.startswith("read_file (") for t in tools)

    rows = doc.xpath('//table[@class="runs"]/tbody/tr')
    assert len(rows) == 5
    assert sorted(doc.xpath("//details/@id")) == sorted(f"run-{r}" for r in run_ids)
    failed = doc.xpath(f'//details[@id="run-{run_ids[3]}"]/summary')[0].text_content()
    assert "Failed" in failed
    # The dry run's planned change is shown as a diff, added lines marked.
    added = doc.xpath(f'//details[@id="run-{run_ids[0]}"]//pre[@class="diff"]/span[@class="da"]')
    assert any("cooking" in span.text_content() for span in added)
    # ... and as old -> new per field, read back from the note_changes table.
    changed = doc.xpath(
        f'//details[@id="run-{run_ids[0]}"]//h3[.="What changed"]/following-sibling::table[1]'
        "/tbody/tr"
    )
    new_values = [row.xpath("td")[3].text_content() for row in changed]
    assert any("cooking" in value for value in new_values), new_values


def test_page_is_self_contained_and_escapes_model_text(
    batch_store: tuple[Path, list[str]],
) -> None:
    from toolwire.htmlreport import write_html_report
    from toolwire.store import Store

    db, run_ids = batch_store
    out = write_html_report(Store(db), db.parent / "out" / "one.html", run_id=run_ids[2][:10])
    page = out.read_text(encoding="utf-8")
    doc = lxml_html.fromstring(page)
    assert doc.xpath("//script | //link | //img | //iframe | //object") == []
    assert doc.xpath("//@src") == []
    assert all(href.startswith("#") for href in doc.xpath("//@href"))
    assert "http" not in page and "url(" not in page
    reasons = doc.xpath('//table[@class="ops"]//td/text()')
    assert "<script>alert(1)</script> bread" in reasons
    assert len(doc.xpath('//table[@class="runs"]/tbody/tr')) == 1
    assert doc.xpath("//body/p")[0].text_content().startswith("1 run: ")


def test_report_cli_writes_the_page(batch_store: tuple[Path, list[str]], tmp_path: Path) -> None:
    db, _ = batch_store
    out = tmp_path / "cli.html"
    ran = subprocess.run(
        [sys.executable, "-m", "toolwire", "report", "--batch", "h", "--html", out, "--db", db],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert ran.returncode == 0, ran.stderr
    assert f"report: {out}" in ran.stderr
    assert len(lxml_html.fromstring(out.read_text(encoding="utf-8")).xpath("//svg")) == 3
    missing = subprocess.run(
        [sys.executable, "-m", "toolwire", "report", "--batch", "nope", "--html", out, "--db", db],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert missing.returncode == 1 and "no runs of batch 'nope'" in missing.stderr


def _png_pixels(path: Path) -> tuple[int, int, list[bytes]]:
    """Decode an 8-bit RGB/RGBA, non-interlaced PNG into rows of raw pixel bytes."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, header = 8, b"", b""
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind, body = data[pos + 4 : pos + 8], data[pos + 8 : pos + 8 + length]
        header = body if kind == b"IHDR" else header
        idat += body if kind == b"IDAT" else b""
        pos += 12 + length
    width, height, depth, colour, _, _, interlace = struct.unpack(">IIBBBBB", header)
    assert depth == 8 and colour in (2, 6) and interlace == 0
    bpp = 3 if colour == 2 else 4
    raw, stride, rows = zlib.decompress(idat), width * bpp, []
    prev = bytearray(stride)
    for y in range(height):
        kind, line = (
            raw[y * (stride + 1)],
            bytearray(raw[y * (stride + 1) + 1 : (y + 1) * (stride + 1)]),
        )
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b, c = prev[i], prev[i - bpp] if i >= bpp else 0
            if kind == 1:
                line[i] = (line[i] + a) & 0xFF
            elif kind == 2:
                line[i] = (line[i] + b) & 0xFF
            elif kind == 3:
                line[i] = (line[i] + (a + b) // 2) & 0xFF
            elif kind == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                pred = a if pa <= pb and pa <= pc else (b if pb <= pc else c)
                line[i] = (line[i] + pred) & 0xFF
        rows.append(bytes(line) if bpp == 3 else bytes(x for j, x in enumerate(line) if j % 4 != 3))
        prev = line
    return width, height, rows


def test_renders_in_headless_chromium(batch_store: tuple[Path, list[str]]) -> None:
    from toolwire.htmlreport import write_html_report
    from toolwire.store import Store

    db, _ = batch_store
    out = write_html_report(Store(db), db.parent / "out" / "chromium.html", batch_id="h")
    doc = lxml_html.fromstring(out.read_text(encoding="utf-8"))
    expected_bars = len(doc.xpath('//rect[@class="bar"]'))
    assert expected_bars == 10 + 10 + _bars(doc, "chart-tools")
    if not CHROMIUM.exists():
        return  # CI without Chromium: the structural checks above are the whole test
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars"]
    dom = subprocess.run(
        [CHROMIUM, *flags, "--dump-dom", out.as_uri()], capture_output=True, text=True, timeout=120
    )
    assert dom.returncode == 0, dom.stderr[-2000:]
    rendered = lxml_html.fromstring(dom.stdout)
    assert rendered.xpath('//svg[@class="chart"]/@id') == [
        "chart-repair",
        "chart-latency",
        "chart-tools",
    ]
    assert len(rendered.xpath('//rect[@class="bar"]')) == expected_bars
    shot = out.with_suffix(".png")
    taken = subprocess.run(
        [CHROMIUM, *flags, "--window-size=800,700", f"--screenshot={shot}", out.as_uri()],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert taken.returncode == 0, taken.stderr[-2000:]
    width, height, rows = _png_pixels(shot)
    assert (width, height) == (800, 700)
    seen = {colour: 0 for colour in BAR_COLOURS}
    for row in rows:
        for x in range(0, len(row), 3):
            colour = (row[x], row[x + 1], row[x + 2])
            if colour in seen:
                seen[colour] += 1
    # Both series' bars are painted (each bar is 12 px high, many px wide).
    assert all(n > 200 for n in seen.values()), seen
