# Copyright: cargoship developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The fleet map (plugin_utils/_fleet_map.py), on the control host: the desired state of every inventory host
from its own variables (as engine_config's from_inventory spreads them), the nodes, their stamps and their
engines' evidence from the Kubernetes API in two list calls. No host is connected to."""

from __future__ import annotations

from ansible.plugins.action import ActionBase

from ansible_collections.cargoship.engine.plugins.module_utils._kube_access import (
    ARGUMENT_SPEC,
    api_client,
    connection_params,
    describe,
)
from ansible_collections.cargoship.engine.plugins.module_utils._kube_nodes import api_message
from ansible_collections.cargoship.engine.plugins.module_utils._kube_rest import ApiException, KubeApi
from ansible_collections.cargoship.engine.plugins.plugin_utils._fleet_map import fleet_map, map_lines, node_summary
from ansible_collections.cargoship.engine.plugins.plugin_utils._proof import desired_digest
from ansible_collections.cargoship.engine.plugins.plugin_utils._run_options import DESIRED_STATE_ARGS


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(("controllers", "workers", *ARGUMENT_SPEC))

    def run(self, tmp=None, task_vars=None):
        self._supports_check_mode = True
        result = super().run(tmp, task_vars)
        args = self._task.args
        hostvars = task_vars["hostvars"]
        controllers = list(args.get("controllers") or [])
        hosts = {}
        for host in controllers + [h for h in args.get("workers") or [] if h not in controllers]:
            variables = hostvars[host]
            role = "server" if host in controllers else "agent"
            # The desired state as engine_config's from_inventory takes it, from the host's own variables
            # (each templated by hostvars on access); a variable the host does not set is left out.
            state = {key: variables[name] for key, name in DESIRED_STATE_ARGS.items() if name in variables}
            if not state.get("engine"):
                return {**result, "failed": True, "msg": f"{host}: cargoship_engine is not set"}
            hosts[host] = {
                "role": "controller" if role == "server" else "worker",
                "digest": desired_digest(state, role),
                "address": variables.get("ansible_host"),
            }
        params = connection_params(args)
        try:
            api = KubeApi(api_client(params))
            listed = api.request("GET", "/api/v1/nodes") or {}
            pods = (
                api.request("GET", "/api/v1/namespaces/kube-system/pods", {"labelSelector": "component=kube-apiserver"})
                or {}
            )
        except ApiException as exc:
            return {**result, "failed": True, "msg": f"Kubernetes API refused the node list: {api_message(exc)}"}
        except Exception as exc:  # ApiUnavailable, and the client's kinds for an unusable kubeconfig or API
            return {**result, "failed": True, "msg": f"cannot reach the Kubernetes API with {describe(params)}: {exc}"}
        apiserver_pods = {(p.get("spec") or {}).get("nodeName"): p for p in pods.get("items") or []}
        nodes = {
            (item.get("metadata") or {}).get("name"): node_summary(item, apiserver_pods)
            for item in listed.get("items") or []
        }
        fleet = fleet_map(hosts, nodes)
        return {**result, "changed": False, "fleet": fleet, "lines": map_lines(fleet)}
