"""The order the parallel workers take the test modules in (tests/tools/suite_order.py, from docs/testing.md)."""

from __future__ import annotations

import types

import pytest
import suite_order
from suite_time import lanes, minutes, seconds_of


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


class FakeWorker:
    """What xdist's scheduler uses of a worker: the tests it is sent (by their index in its collection)."""

    def __init__(self, name: str) -> None:
        self.gateway = types.SimpleNamespace(id=name)
        self.shutting_down = False
        self.sent: list[int] = []

    def send_runtest_some(self, indexes: list[int]) -> None:
        self.sent += indexes

    def shutdown(self) -> None:
        self.shutting_down = True


def test_xdist_hands_out_the_modules_in_the_collections_order_not_by_their_number_of_tests():
    # `make compat` runs the unit tests without xdist (and so without parallel workers to order).
    pytest.importorskip("xdist")
    options = types.SimpleNamespace(dist="loadfile", loadscopereorder=True, tx=["2*popen"], numprocesses=2)
    config = types.SimpleNamespace(
        option=options,
        getoption=lambda name, default=None: getattr(options, name, default),
        getvalue=lambda name: getattr(options, name),
    )
    scheduler = suite_order.make_scheduler(config, None)
    # As module_order sorts them: a long module of one test first, then modules of more but quicker tests.
    collection = ["soak.py::a", "many.py::a", "many.py::b", "many.py::c", "few.py::a", "few.py::b"]
    workers = [FakeWorker("gw0"), FakeWorker("gw1")]
    for worker in workers:
        scheduler.add_node(worker)
        scheduler.add_node_collection(worker, collection)
    scheduler.schedule()
    first = [collection[worker.sent[0]].split("::")[0] for worker in workers]
    assert first == ["soak.py", "many.py"], first
    # A worker is given its next module only when what it holds is down to one test: gw0, at its one test of
    # the soak, holds the next module already; gw1, with three tests of many.py ahead, does not.
    held = [sorted({collection[index].split("::")[0] for index in worker.sent}) for worker in workers]
    assert held == [["few.py", "soak.py"], ["many.py"]], held


def test_the_lanes_say_when_each_workers_last_test_ended():
    records = [
        {"worker": "gw0", "began": 1000.0, "seconds": 30.0},
        {"worker": "gw1", "began": 1010.0, "seconds": 5.0},
        {"worker": "gw0", "began": 1030.0, "seconds": 90.0},
    ]
    assert lanes(records) == "gw0 at 2 min 00 s, gw1 at 15 s"
    assert lanes([{"worker": "gw0", "seconds": 3.0}]) == ""
