"""Live progress from ansible-runner's events: each phase as it reaches the hosts, failures as they
happen, and where each node is in its sync window (from the node states the steps return), so that the
command knows which nodes to put back after Ctrl-C."""

from __future__ import annotations

from cargoship_runner.collection import node_progress, phases
from cargoship_runner.output import console, errors, styled
from cargoship_runner.runner import masked_output


class Progress:
    def __init__(self, verbose: int = 0) -> None:
        # With -v, Ansible's own output is shown as it comes (masked), instead of the progress lines.
        self.verbose = verbose
        self.nodes = node_progress()
        self.locking = False  # whether the run reached its lock phase (else it holds no lock to release)
        declared = phases()
        self.phase_names = {p["name"] for p in declared}
        self.locking_phases = {p["name"] for p in declared if p.get("run_lock") == "takes"}
        # A line per node where nodes go one by one (the phases declared per_node); a line per phase
        # elsewhere, so that a fleet of hundreds does not print a line per host and phase.
        self.per_node = {p["name"] for p in declared if p.get("per_node")}
        self.current: dict[str, str] = {}
        self.announced: set[str] = set()
        self.told: list[str] = []  # the failures shown, so that the run's closing restatement is not shown again

    @property
    def in_flight(self) -> list[str]:
        """Nodes this run has started to take down and not yet given back."""
        return self.nodes.in_flight

    def __call__(self, event: dict) -> bool:
        data = event.get("event_data") or {}
        host = data.get("host") or ""
        result = data.get("res") or {}
        kind = event.get("event")
        role = (data.get("role") or "").rsplit(".", 1)[-1]
        if kind == "runner_on_ok":
            self.nodes.feed(host, result)
        if kind == "runner_on_start" and role in self.locking_phases:
            self.locking = True
        if self.verbose:
            if event.get("stdout"):
                console.out(masked_output(event["stdout"]), highlight=False)
            return True
        assessed = result.get("cargoship_assessed") if isinstance(result, dict) else None
        if kind in ("runner_on_ok", "runner_on_failed") and isinstance(assessed, list):
            # A dry run's assessment of a play: every host's phases at once, shown as if they had come one by one.
            for item in assessed:
                self.reached(item.get("host", ""), item.get("phase", ""))
                if item.get("status") == "failed":
                    message = (item.get("result") or {}).get("msg", "")
                    errors.print(
                        styled(
                            "  ", (f"{item.get('task', '')} failed on {item.get('host', '')}", "red"), f": {message}"
                        )
                    )
            return True
        if kind in ("runner_on_ok", "runner_on_failed", "runner_on_skipped"):
            self.reached(host, role)
        # The input's problems are listed once, by the report, each with its hosts and file.
        input_errors = isinstance(result, dict) and "input_errors" in result
        if kind in ("runner_on_failed", "runner_on_unreachable") and not data.get("ignore_errors") and not input_errors:
            message = result.get("msg", "") if isinstance(result, dict) else ""
            # The run ends failed with "the run stopped after a failure: <host>: <what failed>": shown already.
            if not (message and any(told in message for told in self.told)):
                self.told += [message] if message else []  # an empty one is in every message: never one to match
                errors.print(styled("  ", (f"{data.get('task', '')} failed on {host}", "red"), f": {message}"))
        return True

    def reached(self, host: str, role: str) -> None:
        """A phase's result came for a host: say so once per phase, or once per node where nodes go one by one."""
        if role not in self.phase_names or self.current.get(host) == role:
            return
        self.current[host] = role
        if role in self.per_node:
            console.print(styled("  ", (f"{role:<16}", "cyan"), " ", host))
        elif role not in self.announced:
            self.announced.add(role)
            console.print(styled("  ", (role, "cyan")))
