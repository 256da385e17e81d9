"""Both reports open on what a run changed, or why nothing (issue 47).

Real runs through the CLI on a real store: a run over a folder with no notes asks no
model and calls no tool, so neither report shows model or tool sections (the HTML page
showed "model latency 0 ms" and empty tool charts); a run that applied changes and was
then undone says undone in its Markdown report and on the page.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from lxml import html as lxml_html
from test_librarian_replay import VALID, _spec, _workspace

pytestmark = pytest.mark.local


def toolwire(*args: str | Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    ran = subprocess.run(
        [sys.executable, "-m", "toolwire", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=cwd,
    )
    assert ran.returncode == 0, ran.stderr[-3000:]
    return ran


def _last_run(db: Path, cwd: Path) -> str:
    ran = toolwire("sql", "select run_id from runs order by started_at desc limit 1",
                   "--db", db, "--format", "csv", cwd=cwd)  # fmt: skip
    return ran.stdout.splitlines()[1].strip()


def _page(db: Path, run_id: str, cwd: Path) -> lxml_html.HtmlElement:
    out = cwd / f"{run_id}.html"
    toolwire("report", run_id, "--html", out, "--db", db, cwd=cwd)
    return lxml_html.fromstring(out.read_text(encoding="utf-8"))


def _sections(doc: lxml_html.HtmlElement) -> list[str]:
    return [h.text_content() for h in doc.xpath("//body/h2")]


def test_a_run_that_asked_no_model_shows_no_model_or_tool_sections(tmp_path: Path) -> None:
    spec = _spec(tmp_path, [VALID])
    (tmp_path / "empty").mkdir()
    db = tmp_path / "store.duckdb"
    toolwire("run", spec, "--workspace", tmp_path / "empty", "--db", db, "--no-prefect",
             cwd=tmp_path)  # fmt: skip
    run_id = _last_run(db, tmp_path)

    report = (tmp_path / "reports" / f"{run_id}.md").read_text("utf-8")
    assert report.splitlines()[2] == "**Nothing changed**: no note needed a change."
    assert report.index("## What changed") < report.index("## Run")
    assert "## Attempts" not in report and "model time" not in report
    assert "- model: " not in report and "(no model asked)" in report

    doc = _page(db, run_id, tmp_path)
    assert _sections(doc)[0] == "What changed"
    opening = doc.xpath('//h2[@id="what-changed"]/following-sibling::p[1]')[0].text_content()
    assert opening == "Nothing changed: the run found nothing to change."
    # Pass rate only: no latency, repairs or first-try series, no tool charts.
    assert doc.xpath('//svg[@class="chart"]/@id') == ["chart-pass"]
    assert len(doc.xpath('//svg[@id="chart-pass"]//rect[@class="bar"]')) == 1


def test_an_undone_run_says_so_in_both_reports(tmp_path: Path) -> None:
    spec = _spec(tmp_path, [VALID])
    ws = _workspace(tmp_path)
    db = tmp_path / "store.duckdb"
    toolwire("run", spec, "--workspace", ws, "--db", db, "--no-prefect", cwd=tmp_path)
    run_id = _last_run(db, tmp_path)
    report_file = tmp_path / "reports" / f"{run_id}.md"
    assert report_file.read_text("utf-8").splitlines()[2] == "**2 notes changed**."
    doc = _page(db, run_id, tmp_path)
    (heading,) = doc.xpath('//h2[@id="what-changed"]/following-sibling::h3[1]')
    assert "2 notes applied" in heading.text_content()

    toolwire("undo", run_id, "--workspace", ws, "--db", db, cwd=tmp_path)
    lines = report_file.read_text("utf-8").splitlines()
    assert lines[2].startswith("**Undone** ") and "2 notes restored" in lines[2], lines[:4]
    assert lines[4] == "**2 notes changed**."  # what the run did, kept below
    stored = toolwire("sql", f"select markdown from reports where run_id = '{run_id}'",
                      "--db", db, "--format", "json", cwd=tmp_path)  # fmt: skip
    assert "**Undone** " in stored.stdout
    doc = _page(db, run_id, tmp_path)
    (heading,) = doc.xpath('//h2[@id="what-changed"]/following-sibling::h3[1]')
    assert "2 notes undone" in heading.text_content()
    assert "(ok, undone)" in heading.text_content()
    (status,) = doc.xpath('//table[@class="runs"]/tbody/tr/td[6]')
    assert status.text_content() == "ok, undone"
    assert "1 ok, undone" in doc.xpath("//body/p[1]")[0].text_content()
