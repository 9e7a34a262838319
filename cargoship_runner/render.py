"""The report on the terminal: the report's own rows (plugin_utils/_report.py) drawn as a table, or as
the plain lines ansible-playbook shows."""

from __future__ import annotations

from rich.table import Table

from cargoship_runner.collection import report_module
from cargoship_runner.output import console

STATUS_STYLE = {
    "ran": "green",
    "would run": "yellow",
    "nothing to do": "dim",
    "unassessed": "magenta",
    "skipped": "dim",
    "failed": "bold red",
}


def render_report(report: dict, output: str = "table") -> None:
    """``table`` for a terminal; ``plain`` for logs, where nothing may fold."""
    rendering = report_module()
    if output == "plain":
        console.out(rendering.render_text(report), highlight=False)
        return
    table = Table(title=rendering.report_title(report).replace(" - ", " — "), show_lines=False)
    for column in rendering.COLUMNS:
        table.add_column(column, overflow="fold")
    for number, name, label, status, lines in rendering.report_rows(report):
        style = STATUS_STYLE.get(status, "")
        table.add_row(number, name, label, f"[{style}]{status}[/{style}]", "\n".join(lines))
    console.print(table)


def render_diffs(report: dict) -> None:
    """--diff: every host's masked file diffs."""
    console.out(report_module().render_diffs(report) or "(no file changes)", highlight=False)
