"""A self-contained HTML report over stored runs (``toolwire report --html``).

One file, no external assets (no scripts, fonts, stylesheets or images to
fetch): CSS is inline and the charts are inline SVG drawn here, so the page
opens the same from a mail attachment, a CI artifact or an air-gapped box.
Every value from the store is escaped; model output and notes are untrusted text.

* ``data``: every query (runs, model x transport comparison, requests, tool calls,
  operations, what changed).
* ``svg``: escaping and the bar chart (one unit per chart).
* ``calls``: one run in detail: requests, tool calls, final report, operations.
* ``page``: the page around them.
"""

from toolwire.htmlreport.data import DEFAULT_LIMIT, ReportData, collect_report
from toolwire.htmlreport.page import render_html, write_html_report

__all__ = ["DEFAULT_LIMIT", "ReportData", "collect_report", "render_html", "write_html_report"]
