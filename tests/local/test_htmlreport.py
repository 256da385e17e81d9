"""The HTML report: self-contained, escaped, per-run requests and tool calls, a model x
transport comparison, one unit per chart, and rendered by headless Chromium.

Everything is checked against a real store built by real (replayed) runs: four librarian
runs (first try, repaired, hostile reason, Failed) and four agent runs (native, execute
with replies refused as a whole, and a hostile model whose output, arguments and tool
results hold markup). The structural checks (lxml) always run. When /usr/bin/chromium
exists the page is also rendered headless: its DOM must hold the same charts and no
script, and the screenshot must show the bar colours (pixels decoded here, no image
library).
"""

from __future__ import annotations

import json
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
REPLAY = REPO / "tests" / "data" / "replay"
CHROMIUM = Path("/usr/bin/chromium")
BAR_COLOURS = {(0x3B, 0x6F, 0xB6), (0xE0, 0x8A, 0x2E)}  # htmlreport's first two series
CHARTS = ["chart-pass", "chart-repairs", "chart-latency", "chart-tool-calls", "chart-tools"]
NO_TOOL = "(reply refused, no tool named)"
# Model text that must come out as text, never as markup.
HOSTILE = VALID.replace(
    "The note is about baking bread.", "&lt;script&gt;alert(1)&lt;/script&gt; bread"
)
RAW_SCRIPT = "<script>alert('raw')</script>"
ARG_IMG = "notes/<img src=x onerror=alert(1)>.md"
NOTE_SCRIPT = "# Evil\n\n<script>alert('note')</script>\n"
FINAL_SCRIPT = "</pre><script>alert('final')</script>"
HOSTILE_AGENT = [
    {
        "text": RAW_SCRIPT,
        "tool_calls": [
            {"id": "c1", "name": "read_file", "arguments": {"path": ARG_IMG}},
            {"id": "c2", "name": "read_file", "arguments": {"path": "evil.md"}},
        ],
    },
    {
        "text": "",
        "tool_calls": [
            {
                "id": "c3",
                "name": "agent__final_report",
                "arguments": {"status": "success", "report": FINAL_SCRIPT},
            }
        ],
    },
]


def _agent(tmp: Path, name: str, transport: str, script: Path, batch: str, db: Path) -> dict:
    from toolwire.flows.batch import BatchItem, BatchShared, execute_item

    scratch = tmp / f"scratch-{name}"
    shutil.copytree(SCRATCH, scratch)
    (scratch / "evil.md").write_text(NOTE_SCRIPT, encoding="utf-8")
    spec = AGENT_SPEC if transport == "native" else REPO / "specs" / f"agent-{transport}.yaml"
    item = BatchItem(9, str(scratch), f"replay:{script}", transport)
    return execute_item(item, BatchShared(str(spec), str(db), batch))


@pytest.fixture(scope="module")
def batch_store(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    """Batch 'h': 4 librarian runs (first try, repaired, hostile, Failed), 4 agent runs
    (native, execute, hostile native, native again with another script)."""
    from toolwire.flows.batch import BatchShared, execute_item, plan_batch

    tmp = tmp_path_factory.mktemp("report")
    db = tmp / "report.duckdb"
    spec, (ws,), good, repair = librarian_inputs(tmp, 1)
    hostile = write_script(tmp / "hostile.jsonl", [HOSTILE])
    failing = write_script(tmp / "failing.jsonl", [MALFORMED] * 3)
    shared = BatchShared(str(spec), str(db), "h", dry_run=True)
    items = plan_batch([ws], [good, repair, hostile, failing])
    outcomes = [execute_item(item, shared) for item in items]
    evil = tmp / "hostile-agent.jsonl"
    evil.write_text("".join(json.dumps(r) + "\n" for r in HOSTILE_AGENT), encoding="utf-8")
    outcomes.append(_agent(tmp, "native", "native", REPLAY / "agent-native.jsonl", "h", db))
    outcomes.append(_agent(tmp, "execute", "execute", REPLAY / "agent-execute.jsonl", "h", db))
    outcomes.append(_agent(tmp, "evil", "native", evil, "h", db))
    statuses = [o["status"] for o in outcomes]
    # The hostile agent claims success without writing index.md: the spec's check fails it.
    assert statuses == ["ok", "ok", "ok", "Failed", "ok", "ok", "Failed"], outcomes
    return db, [o["run_id"] for o in outcomes]


def _page(db: Path, name: str, **scope: str) -> tuple[str, lxml_html.HtmlElement]:
    from toolwire.htmlreport import write_html_report
    from toolwire.store import Store

    out = write_html_report(Store(db), db.parent / "out" / name, **scope)
    page = out.read_text(encoding="utf-8")
    return page, lxml_html.fromstring(page)


def _query(db: Path, sql: str, params: list[object]) -> list[tuple]:
    from toolwire.store import Store

    return Store(db).query(sql, params)[1]


def _bars(doc: lxml_html.HtmlElement, chart: str) -> int:
    return len(doc.xpath(f'//svg[@id="{chart}"]//rect[@class="bar"]'))


def _run(doc: lxml_html.HtmlElement, run_id: str) -> lxml_html.HtmlElement:
    (section,) = doc.xpath(f'//details[@id="run-{run_id}"]')
    return section


def test_batch_page_has_runs_charts_and_diffs(batch_store: tuple[Path, list[str]]) -> None:
    db, run_ids = batch_store
    page, doc = _page(db, "batch.html", batch_id="h")
    assert doc.findtext(".//title") == "toolwire report: batch h (7 runs)"
    assert doc.xpath('//svg[@class="chart"]/@id') == CHARTS
    # 7 model/transport groups: 2 series (pass, first try), 1 (repairs), 2 (latency).
    assert _bars(doc, "chart-pass") == 14 and _bars(doc, "chart-repairs") == 7
    assert _bars(doc, "chart-latency") == 14
    labels = doc.xpath('//svg[@id="chart-pass"]/text[@class="cl"]/title/text()')
    assert "replay:repair.jsonl / xml_attrless" in labels
    assert "replay:agent-native.jsonl / native" in labels

    rows = doc.xpath('//table[@class="runs"]/tbody/tr')
    assert len(rows) == 7
    assert doc.xpath('//details[@class="run"]/@id') == [f"run-{r}" for r in run_ids]
    assert "Failed" in _run(doc, run_ids[3]).xpath("summary")[0].text_content()
    # The dry run's planned change is shown as a diff, added lines marked.
    added = _run(doc, run_ids[0]).xpath('.//pre[@class="diff"]/span[@class="da"]')
    assert any("cooking" in span.text_content() for span in added)
    # ... and as old -> new per field, read back from the note_changes table.
    changed = _run(doc, run_ids[0]).xpath(
        './/h3[.="What changed"]/following-sibling::table[1]/tbody/tr'
    )
    new_values = [row.xpath("td")[3].text_content() for row in changed]
    assert any("cooking" in value for value in new_values), new_values


def test_tool_charts_name_every_tool_and_never_none(batch_store: tuple[Path, list[str]]) -> None:
    db, _ = batch_store
    page, doc = _page(db, "tools.html", batch_id="h")
    tools = doc.xpath('//svg[@id="chart-tool-calls"]/text[@class="cl"]/title/text()')
    stored = _query(db, "SELECT DISTINCT coalesce(tool, ?) FROM tool_calls", [NO_TOOL])
    assert sorted(tools) == sorted(t for (t,) in stored)
    # The execute run's block refused as a whole has no tool: named, not "None".
    assert NO_TOOL in tools and "read_file" in tools
    assert _bars(doc, "chart-tool-calls") == 3 * len(tools)
    timed = doc.xpath('//svg[@id="chart-tools"]/text[@class="cl"]/title/text()')
    # Durations only of tools that ran: not the final report, not refused replies.
    assert set(timed) == {"list_dir", "read_file", "write_file"}
    assert "None" not in " ".join(doc.xpath("//svg//text()"))
    counts = doc.xpath('//svg[@id="chart-tool-calls"]/text[@class="cv"]/text()')
    calls = _query(db, "SELECT count(*) FROM tool_calls", [])[0][0]
    assert sum(int(c) for c in counts) == calls


def test_each_chart_has_one_unit(batch_store: tuple[Path, list[str]]) -> None:
    """A count and a rate never share an axis: every value on a chart has its unit."""
    db, _ = batch_store
    _, doc = _page(db, "units.html", batch_id="h")
    units = {
        "chart-pass": ("percent", lambda v: v.endswith("%")),
        "chart-repairs": ("repair requests per turn", lambda v: v.replace(".", "").isdigit()),
        "chart-latency": ("ms per request", lambda v: v.endswith(" ms")),
        "chart-tool-calls": ("calls", str.isdigit),
        "chart-tools": ("ms per call", lambda v: v.endswith(" ms")),
    }
    for chart, (axis, fits) in units.items():
        svg = doc.xpath(f'//svg[@id="{chart}"]')[0]
        assert svg.xpath('text[@class="ax"]/text()')[2] == axis, chart
        values = svg.xpath('text[@class="cv"]/text()') + svg.xpath('text[@class="ax"]/text()')[:2]
        assert values and all(fits(v) for v in values), (chart, values)
    # Rates are drawn on a fixed 0..100% axis.
    assert doc.xpath('//svg[@id="chart-pass"]/text[@class="ax"]/text()')[:2] == ["0%", "100%"]


def test_model_transport_table_counts_pass_fail_validity_repairs(
    batch_store: tuple[Path, list[str]],
) -> None:
    db, _ = batch_store
    _, doc = _page(db, "compare.html", batch_id="h")
    head = [th.text_content() for th in doc.xpath('//table[@class="compare"]/thead//th')]
    table = {}
    for tr in doc.xpath('//table[@class="compare"]/tbody/tr'):
        cells = [td.text_content() for td in tr.xpath("td")]
        table[cells[0]] = dict(zip(head, cells, strict=True))
    assert len(table) == 7
    failing = table["replay:failing.jsonl / xml_attrless"]
    assert (failing["runs"], failing["ok"], failing["Failed"]) == ("1", "0", "1")
    assert failing["pass rate"] == "0% (0/1)" and failing["first-try valid"] == "0% (0/1)"
    assert failing["repairs"] == "2" and failing["tokens in/out"] == "360/180"
    repair = table["replay:repair.jsonl / xml_attrless"]
    assert repair["pass rate"] == "100% (1/1)" and repair["first-try valid"] == "0% (0/1)"
    assert repair["repairs"] == "1" and repair["repairs per turn"] == "1.00"
    native = table["replay:agent-native.jsonl / native"]
    assert native["turns"] == "5" and native["first-try valid"] == "100% (5/5)"
    assert table["replay:hostile-agent.jsonl / native"]["Failed"] == "1"
    # Latency from the store: the median and p95 of attempts.latency_ms per group.
    for label, p50, p95 in _query(
        db,
        "SELECT r.model, quantile_cont(latency_ms, 0.5), quantile_cont(latency_ms, 0.95) "
        "FROM attempts JOIN runs r USING (run_id) GROUP BY ALL",
        [],
    ):
        row = next(v for k, v in table.items() if k.startswith(f"replay:{Path(label).name} "))
        assert row["p50 ms / request"] == f"{p50:.0f}" and row["p95 ms / request"] == f"{p95:.0f}"


def test_agent_run_shows_its_requests_tool_calls_and_final_report(
    batch_store: tuple[Path, list[str]],
) -> None:
    db, run_ids = batch_store
    run_id = run_ids[4]
    _, doc = _page(db, "agent.html", run_id=run_id)
    run = _run(doc, run_id)
    text = run.text_content()
    assert "No operations" not in text and "No changes" not in text
    assert "8 tool calls, 5 requests" in run.xpath("summary")[0].text_content()
    assert run.xpath('.//pre[contains(@class, "final")]')[0].text_content() == (
        "Wrote index.md: 3 markdown files, one without a heading."
    )
    calls = run.xpath('.//table[@class="calls"]/tbody/tr')
    stored = _query(
        db, "SELECT tool, status, args_json FROM tool_calls WHERE run_id = ? ORDER BY seq", [run_id]
    )
    assert len(calls) == len(stored) == 8
    cells = [[td.text_content() for td in tr.xpath("td")] for tr in calls]
    assert [(c[2], c[4]) for c in cells] == [(t, s) for t, s, _ in stored]
    assert json.loads(cells[1][6]) == {"path": "notes/alpha.md"}
    assert cells[1][7].startswith("# Alpha project")
    assert cells[2][4] == "failure" and "no file 'notes/missing.md'" in cells[2][8]
    # Every request: prompt, raw output (as stored), tokens, latency, validity.
    attempts = _query(
        db,
        "SELECT turn, attempt, raw_text, parse_ok FROM attempts WHERE run_id = ? "
        "ORDER BY turn, attempt",
        [run_id],
    )
    shown = run.xpath('.//details[contains(@class, "attempt")]')
    assert len(shown) == len(attempts) == 5
    for details, (turn, _, raw, ok) in zip(shown, attempts, strict=True):
        summary = details.xpath("summary")[0].text_content()
        assert summary.startswith(f"turn {turn + 1}, first try: valid; tokens in/out ")
        assert " ms; finish stop" in summary and ok
        assert details.xpath('.//pre[contains(@class, "raw")]')[0].text_content() == raw
    first = shown[0].xpath('.//div[@class="msg"]')
    assert [m.xpath('div[@class="role"]')[0].text for m in first] == ["system", "user"]
    assert "Task: Write the file index.md" in first[1].text_content()
    # Later requests show only the messages they add: the call and its result.
    second = shown[1].text_content()
    assert "2 messages as in turn 1, first try, then 2 new messages" in second
    assert "tool (result of call_1)" in second and "notes/alpha.md" in second


def test_librarian_run_shows_requests_with_the_repair(batch_store: tuple[Path, list[str]]) -> None:
    db, run_ids = batch_store
    _, doc = _page(db, "librarian.html", run_id=run_ids[1])
    run = _run(doc, run_ids[1])
    attempts = run.xpath('.//details[contains(@class, "attempt")]')
    summaries = [a.xpath("summary")[0].text_content() for a in attempts]
    assert summaries == [
        "turn 1, first try: invalid (LIBRARIAN_PROTOCOL_INVALID, ATTRIBUTES_NOT_ALLOWED); "
        "tokens in/out 120/60; 0 ms; finish stop",
        "turn 1, repair 1: valid; tokens in/out 120/60; 0 ms; finish stop",
    ]
    raws = run.xpath('.//pre[contains(@class, "raw")]')
    assert raws[0].text_content() == MALFORMED
    assert "ATTRIBUTES_NOT_ALLOWED" in attempts[1].text_content()  # the repair prompt
    assert run.xpath('.//h3[.="Planned changes"]') and run.xpath('.//table[@class="ops"]')
    assert not run.xpath('.//table[@class="calls"]')


def test_page_is_self_contained_and_escapes_model_text(
    batch_store: tuple[Path, list[str]],
) -> None:
    db, run_ids = batch_store
    page, doc = _page(db, "one.html", run_id=run_ids[2][:10])
    assert doc.xpath("//script | //link | //img | //iframe | //object") == []
    assert doc.xpath("//@src") == []
    assert all(href.startswith("#") for href in doc.xpath("//@href"))
    assert "http" not in page and "url(" not in page
    reasons = doc.xpath('//table[@class="ops"]//td/text()')
    assert "<script>alert(1)</script> bread" in reasons
    assert len(doc.xpath('//table[@class="runs"]/tbody/tr')) == 1
    assert doc.xpath("//body/p")[0].text_content().startswith("1 run: ")


def test_hostile_agent_output_arguments_and_results_stay_text(
    batch_store: tuple[Path, list[str]],
) -> None:
    """A model's raw output, its arguments, a note it reads and its final report all hold
    markup: each appears as text, escaped, and the page holds no element they name."""
    db, run_ids = batch_store
    page, doc = _page(db, "evil.html", run_id=run_ids[6])
    assert doc.xpath("//script | //img | //iframe | //object | //@onerror | //@src") == []
    assert "<script" not in page and "<img" not in page
    run = _run(doc, run_ids[6])
    raw = run.xpath('.//pre[contains(@class, "raw")]')[0].text_content()
    assert json.loads(raw)["content"] == RAW_SCRIPT
    assert "&lt;script&gt;alert(&#x27;raw&#x27;)&lt;/script&gt;" in page
    cells = [
        [td.text_content() for td in tr.xpath("td")]
        for tr in run.xpath('.//table[@class="calls"]/tbody/tr')
    ]
    assert json.loads(cells[0][6]) == {"path": ARG_IMG}
    assert ARG_IMG in cells[0][8]  # the tool's error names the path it was given
    assert cells[1][7] == NOTE_SCRIPT
    assert run.xpath('.//pre[contains(@class, "final")]')[0].text_content() == FINAL_SCRIPT
    assert "RUN_CHECK_FAILED" in run.text_content()


def test_runs_before_tool_call_texts_show_sizes_and_say_so(
    batch_store: tuple[Path, list[str]], tmp_path: Path
) -> None:
    """A store written before tool_calls kept texts (schema 7): sizes, and where to look."""
    import duckdb

    db, run_ids = batch_store
    old = tmp_path / "old.duckdb"
    shutil.copy(db, old)
    with duckdb.connect(str(old)) as con:
        con.execute("UPDATE tool_calls SET args_json = NULL, result_text = NULL")
    _, doc = _page(old, "old.html", run_id=run_ids[4])
    run = _run(doc, run_ids[4])
    assert "older than the store's tool-call texts" in run.text_content()
    cells = [td.text_content() for td in run.xpath('.//table[@class="calls"]/tbody/tr[1]/td')]
    assert cells[6] == "36 B, not stored" and cells[7] == "88 B, not stored"
    assert "its text was not stored by this older run" in run.text_content()


def test_report_cli_writes_the_page(batch_store: tuple[Path, list[str]], tmp_path: Path) -> None:
    db, run_ids = batch_store
    out = tmp_path / "cli.html"
    ran = subprocess.run(
        [sys.executable, "-m", "toolwire", "report", "--batch", "h", "--html", out, "--db", db],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert ran.returncode == 0, ran.stderr
    assert f"report: {out}" in ran.stderr
    doc = lxml_html.fromstring(out.read_text(encoding="utf-8"))
    assert doc.xpath('//svg[@class="chart"]/@id') == CHARTS
    assert len(doc.xpath('//table[@class="compare"]/tbody/tr')) == 7
    assert len(doc.xpath('//table[@class="calls"]')) == 3  # one per agent run
    assert doc.xpath("//script") == []
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


def _chromium(*args: str) -> subprocess.CompletedProcess[str]:
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars"]
    ran = subprocess.run(
        [str(CHROMIUM), *flags, *args], capture_output=True, text=True, timeout=120
    )
    assert ran.returncode == 0, ran.stderr[-2000:]
    return ran


def _colours(shot: Path, wanted: set[tuple[int, int, int]]) -> dict[tuple[int, int, int], int]:
    _, _, rows = _png_pixels(shot)
    seen = dict.fromkeys(wanted, 0)
    for row in rows:
        for x in range(0, len(row), 3):
            colour = (row[x], row[x + 1], row[x + 2])
            if colour in seen:
                seen[colour] += 1
    return seen


def test_renders_in_headless_chromium(batch_store: tuple[Path, list[str]]) -> None:
    db, run_ids = batch_store
    _, doc = _page(db, "chromium.html", batch_id="h")
    out = db.parent / "out" / "chromium.html"
    expected_bars = len(doc.xpath('//rect[@class="bar"]'))
    assert expected_bars == 14 + 7 + 14 + _bars(doc, "chart-tool-calls") + _bars(doc, "chart-tools")
    if not CHROMIUM.exists():
        return  # CI without Chromium: the structural checks above are the whole test
    rendered = lxml_html.fromstring(_chromium("--dump-dom", out.as_uri()).stdout)
    assert rendered.xpath('//svg[@class="chart"]/@id') == CHARTS
    assert len(rendered.xpath('//rect[@class="bar"]')) == expected_bars
    assert rendered.xpath("//script | //img") == []
    assert len(rendered.xpath('//details[@class="run"]')) == 7
    shot = out.with_suffix(".png")
    _chromium("--window-size=900,1300", f"--screenshot={shot}", out.as_uri())
    width, height, _ = _png_pixels(shot)
    assert (width, height) == (900, 1300)
    # Both series' bars are painted (each bar is 12 px high, many px wide).
    assert all(n > 200 for n in _colours(shot, BAR_COLOURS).values())

    # An agent run and a librarian run, opened: the final report (green) and the raw
    # outputs (lilac) are painted, not only present in the DOM.
    for run_id in (run_ids[4], run_ids[1]):
        page, _ = _page(db, f"open-{run_id}.html", run_id=run_id)
        opened = db.parent / "out" / f"open-{run_id}.html"
        opened.write_text(page.replace("<details ", "<details open "), encoding="utf-8")
        dom = lxml_html.fromstring(_chromium("--dump-dom", opened.as_uri()).stdout)
        assert len(dom.xpath("//details[@open]")) == len(dom.xpath("//details")) > 2
        shot = opened.with_suffix(".png")
        _chromium("--window-size=1200,4000", f"--screenshot={shot}", opened.as_uri())
        wanted = {(0xF6, 0xF6, 0xFB)} | ({(0xF1, 0xF8, 0xF2)} if run_id == run_ids[4] else set())
        assert all(n > 1000 for n in _colours(shot, wanted).values()), run_id
