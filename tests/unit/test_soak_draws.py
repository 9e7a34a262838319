"""What the chaos soak draws (tests/soak/soak.py), checked without a lab: a rollout changes what it says it
changes, and the short soak of `make test` draws the faults its test names."""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(REPO / "tests" / "soak")]

import soak  # noqa: E402

KINDS = ("registries", "audit_policy", "pod_security", "chart_values")


def rollouts(seed: str, count: int, engine: str = "k3s"):
    """The state before and after each rollout of a seed on one engine, as soak.soak carries it."""
    state = soak.start_state(engine)
    for index in range(count):
        _rng, new, change, fault = soak.drawn(seed, index, state, engine)
        yield state, new, change, fault
        state = new


def test_every_kind_a_rollout_names_differs_from_the_state_in_force():
    # Before the redraw, 9 of the 12 seeds the docs name drew a kind's value in force again (an audit or
    # pod-security level): the rollout changed less than it said, and an engine fault met nothing.
    checked = 0
    for number in range(150):
        for engine in ("k3s", "rke2"):
            for before, after, change, _fault in rollouts(f"draws-{number}", 8, engine):
                named = [kind for kind in KINDS if before.get(f"cargoship_{kind}") != after.get(f"cargoship_{kind}")]
                said = change[:-1]  # the last part says how the rollout goes (drain or in place, how many at once)
                assert len(named) == len(said), (number, engine, change)
                checked += len(said)
    assert checked > 2000


def test_the_short_soak_draws_a_ctrl_c_a_sigkill_and_an_ssh_cut_each_with_a_registries_change():
    drawn = list(rollouts("short-249", 3))
    assert [fault.name for _b, _a, _c, fault in drawn] == ["sigint", "sigkill", "ssh_cut"]
    for before, after, change, _fault in drawn:
        assert any(part.startswith("registries via ") for part in change), change
        assert after["cargoship_registries"] != before["cargoship_registries"]
