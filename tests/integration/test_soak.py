"""The chaos soak in short (tests/soak/soak.py; ``make soak`` runs the long one): three rollouts of a fixed seed
on the suite's common lab, each a random change of the desired state struck by a fault at a random moment,
then the documented recovery; every invariant must hold after each."""

from __future__ import annotations

import sys

import pytest
from helpers import REPO

sys.path[:0] = [str(REPO / "tests" / "soak")]

import soak  # noqa: E402

pytestmark = pytest.mark.lab
# The seed draws a Ctrl-C, a SIGKILL and an SSH cut, in that order, each with a registries change every node
# restarts for (``soak.drawn``), each fault at its own moment.
SEED = "short-249"


def test_a_short_soak_of_fixed_seeds_ends_every_rollout_with_the_fleet_whole(lab_manager, tmp_path):
    lab = lab_manager.get(hosts=3, controllers=1, engine="k3s")
    records = soak.soak(SEED, 3, ["k3s"], 3, 1, tmp_path / "soak.jsonl", lab=lab)
    assert [r["fault"] for r in records] == ["sigint", "sigkill", "ssh_cut"]
    assert all(not r["breach"] for r in records), [r["breach"] for r in records]
    assert all(r["recovery"]["rc"] == 0 for r in records)
