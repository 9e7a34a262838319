"""Benchmark: a dry run (and optionally a real run) of engine-config-sync on N lab hosts.

    .venv/bin/python tests/bench/dry_run.py --hosts 50 [--controllers 3] [--real] [--forks 50]

Brings the lab up with N hosts, runs the cargoship command and prints wall time, the phases' statuses,
and how many tasks ran per host (from ansible-runner events), then takes the lab down. Timing is
measured here, never asserted in tests.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import time
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests" / "lab"))

import labctl  # noqa: E402

from cargoship_runner.runner import RunOptions, run_playbook  # noqa: E402


def measure(inventory: Path, dry_run: bool, forks: int) -> dict:
    tasks: Counter = Counter()

    def count(event: dict) -> bool:
        if event.get("event") in ("runner_on_ok", "runner_on_failed", "runner_on_skipped", "runner_on_unreachable"):
            data = event.get("event_data") or {}
            tasks[data.get("host")] += 1
        return True

    extravars = {"cargoship_work_concurrency": "20%"}
    started = time.monotonic()
    outcome = run_playbook(RunOptions("engine_config_sync", inventory, dry_run, None, forks, extravars), count)
    elapsed = time.monotonic() - started
    statuses = {p["name"]: p["status"] for p in (outcome.report or {}).get("phases", [])}
    per_host = sorted(tasks.values())
    return {
        "rc": outcome.rc,
        "seconds": elapsed,
        "statuses": statuses,
        "tasks_per_host": (per_host[0], per_host[len(per_host) // 2], per_host[-1]) if per_host else None,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("--hosts", type=int, default=50)
    parser.add_argument("--controllers", type=int, default=3)
    parser.add_argument("--forks", type=int, default=50)
    parser.add_argument("--real", action="store_true", help="also time a real run after the dry run")
    args = parser.parse_args()
    up_started = time.monotonic()
    lab = labctl.up(args.hosts, args.controllers, "k3s")
    try:
        up_seconds = time.monotonic() - up_started
        (lab.state / "group_vars").mkdir(exist_ok=True)
        shutil.copy(REPO / "examples" / "group_vars" / "all.yml", lab.state / "group_vars" / "all.yml")
        inventory = lab.state / "inventory.yml"
        runs = [("dry run", measure(inventory, True, args.forks))]
        if args.real:
            runs.append(("real run", measure(inventory, False, args.forks)))
            runs.append(("dry run after", measure(inventory, True, args.forks)))
        print(f"\n{args.hosts} hosts ({args.controllers} controllers), forks {args.forks}; lab up in {up_seconds:.1f}s")
        for name, run in runs:
            low, median, high = run["tasks_per_host"] or (0, 0, 0)
            print(
                f"  {name:<14} rc={run['rc']} {run['seconds']:6.1f}s  tasks per host min/median/max {low}/{median}/{high}"
            )
            print("  " + " ".join(f"{phase}={status}" for phase, status in run["statuses"].items()))
    finally:
        labctl.down(log=lambda _msg: None)
    return 0


if __name__ == "__main__":
    sys.exit(main())
