"""The report on the terminal: the report's own rows (plugin_utils/_report.py) drawn as a table, or as
the plain lines ansible-playbook shows."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text

from cargoship_runner.collection import report_module
from cargoship_runner.output import console, errors, styled

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
    for line in rendering.error_lines(report):
        errors.print(styled(("error", "bold red"), line.removeprefix("error")))
    if rendering.reached_no_phase(report):
        errors.print(f"{rendering.report_title(report)}: {rendering.NOTHING_RUN}")
        return
    if output == "plain":
        console.out(rendering.render_text({**report, "errors": []}), highlight=False)
        return
    # Every cell is Text, never markup: host names, paths and messages are shown as they are.
    table = Table(title=Text(rendering.report_title(report).replace(" - ", " — ")), show_lines=False)
    for column in rendering.COLUMNS:
        table.add_column(Text(column), overflow="fold")
    for number, name, label, status, lines in rendering.report_rows(report):
        table.add_row(
            Text(number),
            Text(name),
            Text(label),
            Text(status, style=STATUS_STYLE.get(status, "")),
            Text("\n".join(lines)),
        )
    console.print(table, soft_wrap=False)


def render_diffs(report: dict) -> None:
    """--diff: every host's masked file diffs."""
    console.out(report_module().render_diffs(report) or "(no file changes)", highlight=False)
