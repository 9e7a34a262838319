"""The order the parallel workers take the test modules in (tests/tools/suite_order.py, from docs/testing.md)."""

from __future__ import annotations

import suite_order


def test_the_generated_table_is_read_with_each_modules_wall_time_and_cpu():
    assert suite_order.seconds("7 min 54 s") == 474 and suite_order.seconds("0 s") == 0
    figures = suite_order.module_figures()
    assert figures["tests/integration/test_real_engines.py"][0] > 60
    assert all(wall >= 0 and cpu >= 0 for wall, cpu in figures.values())


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
