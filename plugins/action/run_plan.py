# Copyright: cargoship developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A reviewed plan (plugin_utils/_plan.py), on the control host: written at the end of a dry run, checked
against every host before a real run changes anything, and against each node before it is touched.

The plan is made from what the connect phase's survey brought back from each host (the engine's read and the
sync phase's comparison, with each managed file's fingerprint), each host's desired state from its own
variables (as engine_config's from_inventory takes it), and the cluster's node names (one API call). The
check makes the same plan from what the hosts show now and names every difference."""

from __future__ import annotations

from ansible.plugins.action import ActionBase

from ansible_collections.cargoship.engine.plugins.module_utils._desired_state import MANAGED_BY
from ansible_collections.cargoship.engine.plugins.module_utils._kube_access import (
    ARGUMENT_SPEC,
    api_client,
    connection_params,
    describe,
)
from ansible_collections.cargoship.engine.plugins.module_utils._kube_nodes import api_message
from ansible_collections.cargoship.engine.plugins.module_utils._kube_rest import ApiException, KubeApi
from ansible_collections.cargoship.engine.plugins.plugin_utils import _plan
from ansible_collections.cargoship.engine.plugins.plugin_utils._phase_rules import charts_kept, truthy
from ansible_collections.cargoship.engine.plugins.plugin_utils._run_options import DESIRED_STATE_ARGS

STATES = ("written", "checked", "node_checked")
MANAGED = ",".join(f"{key}={value}" for key, value in MANAGED_BY.items())  # as helm_chart_configs selects them
SYNC_PHASES = {"controller": "sync_controller", "worker": "sync_worker"}


class Refused(Exception):
    """The plan cannot be written or applied; the message says why."""


def role_of(host: str, variables) -> str:
    return "controller" if host in (variables.get("fleet_controllers") or []) else "worker"


def desired_state(variables) -> dict:
    """The host's desired state as engine_config's from_inventory spreads it (a variable not set left out)."""
    return {key: variables[name] for key, name in DESIRED_STATE_ARGS.items() if name in variables}


def survey_answer(host: str, variables, phase: str) -> dict:
    survey = variables.get("connect_survey")
    answers = survey.get("answers") if isinstance(survey, dict) else None
    found = next((a for a in answers or [] if a.get("phase") == phase), None)
    result = (found or {}).get("result")
    if not isinstance(result, dict) or result.get("skipped") or result.get("failed"):
        why = (result or {}).get("msg") or "the survey did not ask it"
        raise Refused(f"{host}: no answer to {phase}'s read from its survey ({why})")
    return result


def entry_of(host: str, variables, engine: dict, compared: dict) -> dict:
    mode = _plan.mode_of(compared, engine, variables)
    return _plan.host_entry(host, role_of(host, variables), desired_state(variables), engine, compared, mode)


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(
        ("state", "path", "expect_digest", "hosts", "host", "compared", "engine", "restart", *ARGUMENT_SPEC)
    )

    def run(self, tmp=None, task_vars=None):
        self._supports_check_mode = True
        result = super().run(tmp, task_vars)
        args = self._task.args
        state = args.get("state")
        try:
            if state not in STATES:
                raise Refused(f"state must be one of {', '.join(STATES)}, not {state!r}")
            if not args.get("path"):
                raise Refused("path is required: the plan file")
            if task_vars.get("cargoship_phase"):
                raise Refused("a plan covers a whole run: it cannot be written or applied with one phase run alone")
            if state == "written":
                return {**result, **self.written(args, task_vars)}
            if state == "checked":
                return {**result, **self.checked(args, task_vars)}
            return {**result, **self.node_checked(args, task_vars)}
        except (Refused, _plan.PlanError) as exc:
            return {**result, "failed": True, "msg": str(exc)}

    # -- the whole fleet ----------------------------------------------------------------------------------

    def made_now(self, args: dict, task_vars: dict, salt: str) -> dict:
        """The plan as it would be made from the survey's answers of this run."""
        hostvars = task_vars["hostvars"]
        hosts, states, problems = {}, {}, []
        for host in args.get("hosts") or []:
            variables = hostvars[host]
            try:
                engine = survey_answer(host, variables, "engine_facts")
                compared = survey_answer(host, variables, SYNC_PHASES[role_of(host, variables)])
            except Refused as exc:
                problems.append(str(exc))
                continue
            hosts[host] = entry_of(host, variables, engine, compared)
            states[host] = desired_state(variables)
        if problems:
            raise Refused("; ".join(problems))
        if not hosts:
            raise Refused("no host to make a plan for")
        nodes, deletes = self.from_the_api(args, hostvars, list(hosts))
        return _plan.make(hosts, list(nodes), states, salt, cluster=deletes + labels(hosts, hostvars, nodes))

    @staticmethod
    def from_the_api(args: dict, hostvars, hosts: list) -> tuple[list, list]:
        """The cluster's nodes (name: labels), and the chart values the controllers' phase would delete through the API
        (HelmChartConfigs cargoship made for charts no longer in the inventory: roles/node_sync/tasks/prune_charts.yml,
        under the same conditions)."""
        params = connection_params(args)
        first = hostvars[hosts[0]]
        values = first.get("cargoship_chart_values")
        controllers = set(first.get("fleet_controllers") or [])
        prunes = values is not None and controllers <= set(hosts)
        try:
            api = KubeApi(api_client(params))
            listed = api.request("GET", "/api/v1/nodes") or {}
            found = (
                api.list_cluster_custom_object("helm.cattle.io", "v1", "helmchartconfigs", label_selector=MANAGED)
                if prunes
                else {}
            )
        except ApiException as exc:
            raise Refused(f"Kubernetes API refused a read: {api_message(exc)}") from exc
        except Exception as exc:  # ApiUnavailable, and the client's kinds for an unusable kubeconfig or API
            raise Refused(f"cannot reach the Kubernetes API with {describe(params)}: {exc}") from exc
        keep = set(charts_kept(values)) if prunes else set()
        deletes = sorted(
            f"delete HelmChartConfig {item['metadata']['namespace']}/{item['metadata']['name']}"
            for item in found.get("items") or []
            if f"{item['metadata']['namespace']}/{item['metadata']['name']}" not in keep
        )
        nodes = {
            (item.get("metadata") or {}).get("name"): (item.get("metadata") or {}).get("labels") or {}
            for item in listed.get("items") or []
        }
        return nodes, deletes

    def written(self, args: dict, task_vars: dict) -> dict:
        plan = self.made_now(args, task_vars, _plan.new_salt())
        digest = _plan.write(args["path"], plan)
        work = sorted(host for host, entry in plan["hosts"].items() if entry["changes"] or entry["restart"] != "none")
        work += ["the cluster"] if plan["cluster"] else []
        return {
            "changed": False,
            "cargoship_plan": {"digest": digest, "file": str(args["path"]), "written": True, "hosts_with_work": work},
            "msg": f"plan written to {args['path']}: digest {digest}",
        }

    def checked(self, args: dict, task_vars: dict) -> dict:
        plan, digest = _plan.load(args["path"], args.get("expect_digest"))
        now = self.made_now(args, task_vars, plan["inventory"]["salt"])
        found = _plan.differences(plan, now)
        if found:
            raise Refused(
                f"the plan {args['path']} ({digest}) is stale: "
                + "; ".join(found)
                + ". Nothing was changed. Make a new plan with a dry run (--plan-out) and review it."
            )
        return {
            "changed": False,
            "cargoship_plan": {"digest": digest, "file": str(args["path"]), "applied": True},
            "msg": f"every host is as the plan {digest} found it",
        }

    # -- one node, before it is touched --------------------------------------------------------------------

    def node_checked(self, args: dict, task_vars: dict) -> dict:
        plan, digest = _plan.load(args["path"], args.get("expect_digest"))
        host = str(args.get("host") or "")
        planned = plan["hosts"].get(host)
        if planned is None:
            raise Refused(f"{host} is not in the plan {args['path']} ({digest}); it was not touched")
        variables = task_vars["hostvars"][host]
        now = entry_of(host, variables, args.get("engine") or {}, args.get("compared") or {})
        if args.get("restart") and now["restart"] != (args["restart"] or {}).get("mode"):
            raise Refused(f"{host}: the plan's rules and the sync's disagree on its restart; it was not touched")
        found = _plan.host_differences(host, planned, now)
        if found:
            raise Refused(
                f"{host} is no longer as the plan {digest} found it: "
                + "; ".join(line.split(": ", 1)[1] for line in found)
                + ". It was not touched; the rollout stopped before it."
            )
        return {"changed": False, "msg": f"{host} is as the plan {digest} found it"}


def labels(hosts: dict, hostvars, nodes: dict) -> list:
    """The labels the label_nodes phase would set (when it is on): each host's profile, on its node, where the
    node does not have it yet."""
    found = []
    for host, entry in hosts.items():
        variables = hostvars[host]
        profile = variables.get("cargoship_profile")
        if profile is None or not truthy(variables.get("cargoship_label_nodes", False)):
            continue
        key = f"node-role.kubernetes.io/{profile}"
        if (nodes.get(entry["node"]) or {}).get(key) != "true":
            found.append(f"label node {entry['node']} {key}=true")
    return found
