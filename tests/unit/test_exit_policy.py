"""The command's exit codes, from a run's outcome: every case, without hosts."""

from __future__ import annotations

import pytest

from cargoship_runner.exit_policy import (
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_LOCKED,
    EXIT_OK,
    EXIT_UNREACHABLE,
    EXIT_WORK_FOUND,
    ending,
)


def report(work_found=False, locked_by=None):
    hosts = {"c1": {"status": "failed", "changes": [], **({"locked_by": locked_by} if locked_by else {})}}
    return {"work_found": work_found, "phases": [{"name": "lock", "hosts": hosts}]}


@pytest.mark.parametrize(
    ("given", "code"),
    [
        ({"rc": 0, "report": report()}, EXIT_OK),
        ({"rc": 0, "report": report(work_found=True), "dry_run": True}, EXIT_OK),
        ({"rc": 0, "report": report(work_found=True), "dry_run": True, "detailed_exitcode": True}, EXIT_WORK_FOUND),
        # A real run never says "work found".
        ({"rc": 0, "report": report(work_found=True), "detailed_exitcode": True}, EXIT_OK),
        ({"rc": 2, "report": report()}, EXIT_FAILED),
        # No report: nothing was looked at, never "in sync", even with rc 0.
        ({"rc": 0, "report": None}, EXIT_FAILED),
        ({"rc": 2, "report": report(locked_by="run R (user=alice)")}, EXIT_LOCKED),
        ({"rc": 4, "report": report(locked_by="run R"), "unreachable": ["w9"]}, EXIT_UNREACHABLE),
        ({"rc": 2, "report": None, "unreachable": ["w9"], "interrupted": True}, EXIT_INTERRUPTED),
        (
            {
                "rc": 0,
                "report": report(work_found=True),
                "dry_run": True,
                "detailed_exitcode": True,
                "interrupted": True,
            },
            EXIT_INTERRUPTED,
        ),
    ],
)
def test_exit_codes_by_precedence(given, code):
    assert ending(**given).code == code


def test_the_last_word_names_the_lock_holder_and_the_unreachable_hosts():
    assert ending(rc=2, report=report(locked_by="run R (user=alice)")).message == "c1 is locked by run R (user=alice)"
    assert ending(rc=4, report=None, unreachable=["w1", "w9"]).message == "unreachable: w1, w9"
    assert ending(rc=0, report=report()).message is None
