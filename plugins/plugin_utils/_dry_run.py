# Copyright: cargoship developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A dry run's assessment of one play: every planned phase of the play, for all of its hosts at once, on
the control host, from the answers the connect phase's survey brought back from each host.

A dry run reaches each host once (the survey). What each phase then does with the answers is control-host
work, so it is done here once per play instead of once per host and phase (a task per host and phase is
what a dry run of hundreds of hosts spends its time on, docs/performance.md). The result gives, for each
host and phase, the result its task would have given, so the report is built as before; a real run keeps
the phases' own tasks, one node at a time.

What each phase's assessment is:

- a phase that declares a read (``read`` in its vars/main.yml): the survey's answer to that read;
- validate_hosts: the checks of the hosts against each other (plugin_utils/_host_checks.py);
- engine_facts: its read, then the one check that every host is a node of the cluster, then the refusal
  to replace a CIS-hardened RKE2 server's pod-security file unless told to;
- the per-node sync phases: their comparison, one drain assessment for all of the play's nodes, the
  restart each drifted node would get, the hooks around it, and the chart values a controllers' play
  would delete;
- label_nodes: the labels it would set (or disabled);
- hook points around these phases: the hooks each host would run.

A phase that fails on a host stops the play there, as any_errors_fatal does in a real run.
"""

from __future__ import annotations

import copy

from ansible_collections.cargoship.engine.plugins.plugin_utils._hooks import NODE_ROLES
from ansible_collections.cargoship.engine.plugins.plugin_utils._host_checks import facts_of, outcome
from ansible_collections.cargoship.engine.plugins.plugin_utils._phase_rules import (
    IN_PLACE,
    NO_RESTART,
    charts_kept,
    cis_refusal,
    restart_mode,
    truthy,
)
from ansible_collections.cargoship.engine.plugins.plugin_utils._phases import load_phases, play_steps
from ansible_collections.cargoship.engine.plugins.plugin_utils._run_options import value as run_option

HOOKS = "hooks"  # what the report calls a task of the hooks role

# The task names the report's messages quote, the same as the phases' own tasks have.
TASKS = {
    "validate_hosts": "Check the hosts against each other",
    "nodes_known": "Check that every host is a node of the cluster, and no two are the same node",
    "cis": "Refuse to replace the pod-security file of a CIS-hardened RKE2 server unless told to",
    "compare": "Compare the engine configuration with the desired state",
    "drain_plan": "See which pods draining the batch would evict",
    "restart": "Report the restart",
    "prune_charts": "Delete the chart values of charts no longer in the inventory",
    "labels": "Label the node with its profile",
    "disabled": "Report the phase as disabled",
}


class Stop(Exception):
    """A phase failed on a host: the play stops there."""


def status_of(result: dict) -> str:
    if result.get("failed"):
        return "failed"
    return "changed" if result.get("changed") else "ok"


class PlayAssessment:
    """One play's assessment. ``run_module(name, args)`` runs a module on the control host in check mode;
    ``hostvars`` is Ansible's; ``settings`` the play's settings (the first host's variables)."""

    def __init__(self, hosts: list[str], hostvars, settings, run_module, selected: str = "", hooks=None):
        self.hosts = list(hosts)
        self.vars = {host: hostvars[host] for host in self.hosts}  # each host's variables, looked up once
        self.settings = settings
        self.run_module = run_module
        self.selected = selected or ""
        self.hooks = hooks if isinstance(hooks, dict) else {}
        self.controllers = set(settings.get("fleet_controllers") or [])
        self.items: list[dict] = []  # per host and phase: the result its task would have given
        self.answers: dict[str, dict[str, dict]] = {}  # host -> phase -> the survey's answer, as read
        self.diffs: list[dict] = []

    # -- what the report gets -------------------------------------------------------------------------

    def give(self, host: str, phase: str, task: str, result: dict) -> dict:
        self.items.append({"host": host, "phase": phase, "task": task, "status": status_of(result), "result": result})
        return result

    def failed_items(self) -> list[dict]:
        return [item for item in self.items if item["status"] == "failed"]

    def run(self, play: str) -> dict:
        declared = load_phases()
        by_name = {p["name"]: p for p in declared}
        steps = play_steps(declared, play, self.selected, self.hook_points(), True, scope="play")
        for step in steps:
            if step["role"] == HOOKS:
                self.list_hooks(step["point"])
            else:
                handler = getattr(self, f"assess_{step['role']}", None)
                if handler is not None:
                    handler(by_name[step["role"]])
                else:
                    self.read_only(by_name[step["role"]])
            if self.failed_items():
                break
        result = {"changed": any(i["status"] == "changed" for i in self.items), "cargoship_assessed": self.items}
        if self.diffs:
            result["diff"] = self.diffs
        failed = self.failed_items()
        if failed:
            first = failed[0]
            result.update(failed=True, stopped_by=first["host"], msg=str(first["result"].get("msg", "failed")))
        return result

    def hook_points(self) -> dict:
        """The hooks of every host of the play: a hook point is a step where any host has hooks (one given in
        a host's own variables only too), as a real run includes it for every host whose steps have it."""
        points = dict(self.hooks)
        for host in self.hosts:
            for point, entries in (self.vars[host].get("cargoship_hooks") or {}).items():
                if entries and not points.get(point):
                    points[point] = entries
        return points

    # -- the survey's answers ---------------------------------------------------------------------------

    def answer(self, host: str, phase: dict) -> dict:
        """The survey's answer to the phase's declared read on the host (as phase_read gives it)."""
        survey = self.vars[host].get("connect_survey")
        found = None
        if isinstance(survey, dict) and not survey.get("failed"):
            found = next((a for a in survey.get("answers") or [] if a.get("phase") == phase["name"]), None)
        result = (found or {}).get("result")
        if not isinstance(result, dict) or result.get("skipped"):
            why = (result or {}).get("msg") or "the survey did not ask it"
            result = {"failed": True, "msg": f"{phase['name']}: no answer from the survey of {host} ({why})"}
        else:
            result = {**copy.deepcopy(result), "answered_by": "host_survey"}
        self.answers.setdefault(host, {})[phase["name"]] = result
        return result

    def read_only(self, phase: dict) -> None:
        if not phase.get("read"):
            raise ValueError(f"the dry run has no assessment for phase {phase['name']} (it declares no read)")
        for host in self.hosts:
            result = self.answer(host, phase)
            self.give(host, phase["name"], phase["title"], result)
            self.keep_diff(host, result)

    def keep_diff(self, host: str, result: dict) -> None:
        for diff in result.get("diff") or []:
            if isinstance(diff, dict):
                named = dict(diff)
                for key in ("before_header", "after_header"):
                    if key in named:
                        named[key] = f"{host}: {named[key]}"
                self.diffs.append(named)

    def engine(self, host: str) -> dict:
        return self.answers.get(host, {}).get("engine_facts") or self.answer_of("engine_facts", host)

    def answer_of(self, phase_name: str, host: str) -> dict:
        """An answer of a phase of an earlier play (the engine's facts in the sync plays)."""
        phase = next(p for p in load_phases() if p["name"] == phase_name)
        return self.answer(host, phase)

    def node_name(self, host: str) -> str:
        return ((self.engine(host).get("settings") or {}).get("node_name")) or host

    # -- the phases -------------------------------------------------------------------------------------

    def assess_validate_hosts(self, phase: dict) -> None:
        facts = {
            host: facts_of(self.answers.get(host, {}).get("detect_os"), self.answers.get(host, {}).get("host_facts"))
            for host in self.hosts
        }
        result = outcome(facts, int(run_option(self.settings, "cargoship_max_clock_skew")))
        self.give(self.hosts[0], phase["name"], TASKS["validate_hosts"], result)

    def api_args(self) -> dict:
        args = {}
        for option, name in (("kubeconfig", "cargoship_api_kubeconfig"), ("context", "cargoship_api_context")):
            value = self.settings.get(name)
            if value is not None:
                args[option] = value
        # As the plays' module_defaults give them to a real run's API calls.
        if self.settings.get("fleet_api_hosts"):
            args["fallback_hosts"] = list(self.settings["fleet_api_hosts"])
        return args

    def assess_engine_facts(self, phase: dict) -> None:
        self.read_only(phase)
        if self.failed_items():
            return
        node_of = {host: (self.engine(host).get("settings") or {}).get("node_name") for host in self.hosts}
        known = self.run_module("cluster_node", {"state": "known", "node_of": node_of, **self.api_args()})
        self.give(self.hosts[0], phase["name"], TASKS["nodes_known"], known)
        if known.get("failed"):
            return
        for host in self.hosts:
            variables = self.vars[host]
            refusal = host in self.controllers and cis_refusal(
                host,
                self.engine(host),
                variables.get("cargoship_engine"),
                "cargoship_pod_security" in variables,
                run_option(variables, "cargoship_pod_security_over_cis"),
            )
            if refusal:
                self.give(host, phase["name"], TASKS["cis"], {"failed": True, "msg": refusal})

    def assess_sync_controller(self, phase: dict) -> None:
        self.node_sync(phase, "controller")
        if not self.failed_items():
            self.prune_charts(phase)

    def assess_sync_worker(self, phase: dict) -> None:
        self.node_sync(phase, "worker")

    def node_sync(self, phase: dict, hook_role: str) -> None:
        restarts, with_work = {}, []
        for host in self.hosts:
            plan = self.answer(host, phase)
            self.give(host, phase["name"], TASKS["compare"], plan)
            self.keep_diff(host, plan)
            if not plan.get("failed"):
                variables = self.vars[host]
                mode = restart_mode(
                    plan,
                    self.engine(host),
                    run_option(variables, "cargoship_force"),
                    run_option(variables, "cargoship_restart"),
                )
                if mode["mode"] != NO_RESTART:
                    restarts[host] = mode
                if mode["mode"] != NO_RESTART or plan.get("changed"):
                    with_work.append(host)
        if self.failed_items():
            return
        # Only the nodes that a real run would drain (a restart in place drains none).
        drained = [self.node_name(host) for host, mode in restarts.items() if mode["mode"] != IN_PLACE]
        drain = {}
        if drained:
            drain = self.run_module(
                "cluster_node",
                {
                    "names": drained,
                    "state": "drained",
                    "force": run_option(self.settings, "cargoship_drain_force"),
                    **self.api_args(),
                },
            )
            self.give(self.hosts[0], phase["name"], TASKS["drain_plan"], drain)
            if drain.get("failed"):
                return
        for host in with_work:
            mode = restarts.get(host)
            if mode is not None:
                service = self.engine(host).get("service", "")
                if mode["mode"] == IN_PLACE:
                    changes = [f"restart {service} in place ({mode['why']})", "wait until Ready"]
                else:
                    changes = list((drain.get("by_node") or {}).get(self.node_name(host)) or [])
                    changes += [f"drain and restart {service} ({mode['why']})", "wait until Ready", "uncordon"]
                self.give(host, phase["name"], TASKS["restart"], reported(phase["name"], changes))
            # The window check before any node with work; the hooks around a restart only where there is one.
            hooks = self.vars[host].get("cargoship_hooks") or {}
            for when in ("window", "before", "after") if mode is not None else ("window",):
                point = f"{phase['name']}.{when}.{hook_role}"
                if hooks.get(point):
                    self.give(host, HOOKS, f"Hooks at {point}", hooks_listed(point, hooks[point]))

    def prune_charts(self, phase: dict) -> None:
        values = self.settings.get("cargoship_chart_values")
        if values is None or not self.controllers <= set(self.hosts):
            return
        pruned = self.run_module("helm_chart_configs", {"keep": charts_kept(values), **self.api_args()})
        self.give(self.hosts[-1], phase["name"], TASKS["prune_charts"], pruned)

    def assess_label_nodes(self, phase: dict) -> None:
        enabled = self.settings.get("cargoship_label_nodes", self.selected == "label_nodes")
        if not truthy(enabled):
            reason = "cargoship_label_nodes is not true (and the phase was not asked for by name)"
            self.give(self.hosts[0], phase["name"], TASKS["disabled"], reported(phase["name"], [], reason))
            return
        for host in self.hosts:
            profile = self.vars[host].get("cargoship_profile")
            if profile is None:
                continue
            args = {"name": self.node_name(host), "state": "labeled", **self.api_args()}
            args["labels"] = {f"node-role.kubernetes.io/{profile}": "true"}
            self.give(host, phase["name"], TASKS["labels"], self.run_module("cluster_node", args))
            if self.failed_items():
                return

    def list_hooks(self, point: str) -> None:
        """A hook point around a phase: what each host would run there (its own node role's hooks)."""
        for host in self.hosts:
            full = f"{point}.{NODE_ROLES[0] if host in self.controllers else NODE_ROLES[1]}"
            entries = (self.vars[host].get("cargoship_hooks") or {}).get(full) or []
            self.give(host, HOOKS, f"Hooks at {full}", hooks_listed(full, entries))


def reported(phase: str, changes: list, reason: str | None = None) -> dict:
    """What the phase_report action returns (the report reads ``cargoship_phase``)."""
    marker = {"phase": phase, "mode": "disabled" if reason else None, "reason": reason, "changes": changes}
    return {"changed": bool(changes), "cargoship_phase": marker}


def hooks_listed(point: str, entries: list) -> dict:
    return reported(
        point, [f"would run hook {point}: {entry.get('name')}" for entry in entries if isinstance(entry, dict)]
    )
