"""What the command does after a run that did not finish: put back the nodes Ctrl-C caught part-way,
and release the locks a failed run still holds."""

from __future__ import annotations

import signal
import threading
from dataclasses import replace

from cargoship_runner.output import errors
from cargoship_runner.runner import STOP_SIGNALS, RunOptions, run_playbook


def recover(options: RunOptions, run_id: str, nodes: list[str]) -> None:
    """After Ctrl-C (rescue blocks do not run on SIGINT): put the nodes this run had started on back as
    they were. What each node is like afterwards is the ``node_sync_outcome`` fact the restore sets."""
    # Ctrl-C again stops the recovery, from the moment it is offered: caught from here, not only once the
    # recovery's run has begun (a signal before that stops it at once, and the nodes are named as not recovered).
    stopped = threading.Event()
    previous = {sig: signal.signal(sig, lambda *_: stopped.set()) for sig in STOP_SIGNALS}
    try:
        recover_nodes(options, run_id, nodes, stopped)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def recover_nodes(options: RunOptions, run_id: str, nodes: list[str], stopped: threading.Event) -> None:
    errors.print(
        f"interrupted while working on {', '.join(nodes)}: putting them back as they were (Ctrl-C again to stop)"
    )
    recovery = replace(
        options,
        playbook="recover",
        dry_run=False,
        limit=",".join(nodes),
        extravars={"cargoship_run_id": run_id},
        verbosity=0,
        keep_artifacts=False,
    )
    outcomes: dict[str, str] = {}

    def collect(event: dict) -> bool:
        data = event.get("event_data") or {}
        facts = (data.get("res") or {}).get("ansible_facts") or {}
        if event.get("event") == "runner_on_ok" and "node_sync_outcome" in facts:
            outcomes[data["host"]] = f"{data['host']}: {facts['node_sync_outcome']}"
        return True

    outcome = run_playbook(recovery, collect, interrupted=stopped)
    for node in nodes:
        if node in outcomes:
            errors.print(f"  {outcomes[node]}")
        else:
            errors.print(
                f"  {node}: NOT recovered{' (stopped by Ctrl-C)' if outcome.interrupted else ''}. It may be cordoned, "
                "its engine stopped or its files new. To resume: rerun engine-config-sync, or run the recovery alone "
                f"with `ansible-playbook {options.inventory_args()} cargoship.engine.recover "
                f"-e cargoship_run_id={run_id} --limit {node}`"
            )


def release_own_locks(options: RunOptions, run_id: str) -> None:
    """After a failed run the playbook never reached its unlock phase: release this run's locks now."""
    cleanup = replace(
        options,
        playbook="unlock",
        dry_run=False,
        extravars={"cargoship_run_id": run_id},
        verbosity=0,
        keep_artifacts=False,
    )
    outcome = run_playbook(cleanup)
    if outcome.rc == 0:
        errors.print("released this run's locks")
    else:
        errors.print(
            f"could not release every lock of run {run_id}; they go stale on their own, or use `cargoship unlock`"
        )
