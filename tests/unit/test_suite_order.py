"""The order the parallel workers take the test modules in (tests/tools/suite_order.py, from docs/testing.md)."""

from __future__ import annotations

import suite_order
from suite_time import minutes, seconds_of


def test_the_generated_table_is_read_with_each_modules_wall_time_and_cpu():
    assert [seconds_of(minutes(value)) for value in (0, 45, 60, 474)] == [0, 45, 60, 474]
    figures = suite_order.module_figures()
    page = (suite_order.REPO / "docs" / "testing.md").read_text()
    rows = [line for line in page.splitlines() if line.startswith("| tests/") and line.count("|") == 10]
    # Every module row of the table is read, not only those whose times the pattern happens to match.
    assert len(rows) > 20 and sorted(figures) == sorted(row.split(" | ")[0].removeprefix("| ") for row in rows)
    assert figures["tests/integration/test_real_engines.py"][0] > 60


def test_new_modules_first_then_those_that_mostly_wait_then_the_rest_longest_first():
    known = {
        "long.py": (400, 200),
        "waits.py": (150, 20),
        "short_wait.py": (5, 0),
        "medium.py": (120, 80),
        "waits_less.py": (40, 1),
    }
    order = sorted([*known, "new.py"], key=suite_order.module_order(known))
    assert order == ["new.py", "waits.py", "waits_less.py", "long.py", "medium.py", "short_wait.py"]
