# Copyright: cargoship developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The proof that a restarted node's engine loaded what was written, then its stamp and its uncordon.

On the host (the engine_evidence module): what the engine generated at its start, against the files on
disk. From the control host (the Kubernetes API): the node's node-args annotation and RKE2's apiserver
mirror pod, against what the host's files say; the API is asked again until it shows the evidence or the
timeout ends (the kubelet replaces a mirror pod a moment after the static pod). A node proven is stamped
(plugin_utils/_proof.py) and, when a cargoship run cordoned it, uncordoned in the same patch; a node that
is not proven is left as it is and the task fails naming what differs, for the rollback to put it back."""

from __future__ import annotations

import time
from urllib.parse import quote

from ansible.plugins.action import ActionBase

from ansible_collections.cargoship.engine.plugins.module_utils._desired_state import (
    ABSENT,
    values_content,
    wanted_charts,
)
from ansible_collections.cargoship.engine.plugins.module_utils._engine_evidence import api_findings
from ansible_collections.cargoship.engine.plugins.module_utils._kube_access import (
    ARGUMENT_SPEC,
    api_client,
    connection_params,
    describe,
)
from ansible_collections.cargoship.engine.plugins.module_utils._kube_nodes import CORDONED_BY, api_message, pause
from ansible_collections.cargoship.engine.plugins.module_utils._kube_rest import ApiException, ApiUnavailable, KubeApi
from ansible_collections.cargoship.engine.plugins.module_utils._node_window import UNCORDONED
from ansible_collections.cargoship.engine.plugins.plugin_utils._proof import (
    STAMP,
    chart_findings,
    desired_digest,
    fingerprints,
    kinds_named,
    stamp_text,
)
from ansible_collections.cargoship.engine.plugins.plugin_utils._reads import with_inventory

OWN = ("node", "node_role", "layout", "run_id", "timeout", "uncordon", "from_inventory", "proves", "with_charts")
DESIRED = ("engine", "registries", "audit_policy", "pod_security", "audit_log", "chart_values")


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(OWN + DESIRED + tuple(ARGUMENT_SPEC))

    def run(self, tmp=None, task_vars=None):
        self._supports_check_mode = True
        result = super().run(tmp, task_vars)
        args = dict(self._task.args)
        if "from_inventory" in args:
            # The desired state as engine_config takes it; its secret paths mask chart values, not read here.
            args = with_inventory(args, self._templar, task_vars)
            args.pop("secret_paths", None)
        if args.get("proves") == "chart_values":
            return {**result, **self.prove_charts(args)}
        for required in ("node", "engine", "run_id"):
            if not args.get(required):
                return {**result, "failed": True, "msg": f"engine_proof needs {required}"}
        node, engine = str(args["node"]), str(args["engine"])
        node_role = str(args.get("node_role") or "agent")
        kinds = kinds_named(args, node_role)
        host = self._execute_module(
            module_name="cargoship.engine.engine_evidence",
            module_args={
                "engine": engine,
                "node_role": node_role,
                "layout": args.get("layout"),
                "kinds": kinds,
                "removed": [kind for kind in kinds if args.get(kind) == ABSENT],
            },
            task_vars=task_vars,
        )
        if host.get("failed"):
            return {
                **result,
                "failed": True,
                "msg": f"cannot read the engine's evidence on the host: {host.get('msg')}",
            }
        if host["differs"]:
            return {**result, **self.not_proven(node, host["differs"])}
        timeout = int(args.get("timeout") or 60)
        params, api = self.api_of(args)
        try:
            found = self.api_evidence(api, node, engine, host["expect"], timeout)
            if found["differs"]:
                return {**result, **self.not_proven(node, found["differs"])}
            digest = desired_digest(args, node_role)
            host_name = str(task_vars.get("inventory_hostname", ""))
            stamp = stamp_text(digest, str(args["run_id"]), kinds, {"host": host_name, **found["prints"]})
            changes = [f"stamp {node} as proven to run {digest[:19]}"]
            patch: dict = {"metadata": {"annotations": {STAMP: stamp}}}
            spec = found["node"].get("spec") or {}
            annotations = (found["node"].get("metadata") or {}).get("annotations") or {}
            if args.get("uncordon", True) and spec.get("unschedulable") and CORDONED_BY in annotations:
                # Only a cordon a cargoship run made is lifted: one someone made for their own reasons stays.
                patch = {
                    "spec": {"unschedulable": None},
                    "metadata": {"annotations": {STAMP: stamp, CORDONED_BY: None}},
                }
                changes.append("uncordon")
            if not self._task.check_mode:
                api.request(
                    "PATCH", f"/api/v1/nodes/{quote(node)}", body=patch, content_type="application/merge-patch+json"
                )
        except ApiException as exc:
            return {**result, "failed": True, "msg": f"Kubernetes API refused the proof of {node}: {api_message(exc)}"}
        except ApiUnavailable as exc:
            return {**result, "failed": True, "msg": f"cannot reach the Kubernetes API with {describe(params)}: {exc}"}
        except Exception as exc:  # the client raises many kinds for an unusable kubeconfig or API
            return {**result, "failed": True, "msg": f"cannot reach the Kubernetes API with {describe(params)}: {exc}"}
        return {
            **result,
            "changed": True,
            "changes": changes,
            "proven": host["proven"] + found["proven"],
            "stamp": stamp,
            "node_state": UNCORDONED,
        }

    @staticmethod
    def api_of(args: dict) -> tuple[dict, KubeApi]:
        params = connection_params(args)
        return params, KubeApi(api_client(params))

    def prove_charts(self, args: dict) -> dict:
        """That helm-controller applied the chart values written: for each chart, the HelmChartConfig in the
        API is what was written and a helm-install job with the hash of those values succeeded."""
        charts = wanted_charts(args)
        timeout = int(args.get("timeout") or 60)
        params, api = self.api_of(args)

        def get(path: str) -> dict | None:
            try:
                return api.request("GET", path)
            except ApiException as exc:
                if exc.status == 404:
                    return None
                raise

        began = time.monotonic()
        try:
            while True:
                proven, differs, notes = [], [], []
                for name, settings in sorted(charts.items()):
                    namespace = settings.get("namespace", "kube-system")
                    where = f"/apis/helm.cattle.io/v1/namespaces/{quote(namespace)}"
                    found = chart_findings(
                        name,
                        namespace,
                        values_content(settings["values"]),
                        get(f"{where}/helmcharts/{quote(name)}"),
                        get(f"{where}/helmchartconfigs/{quote(name)}"),
                        get(f"/apis/batch/v1/namespaces/{quote(namespace)}/jobs/helm-install-{quote(name)}"),
                    )
                    for line, kept in zip(found, (proven, differs, notes), strict=True):
                        if line:
                            kept.append(line)
                if not differs or self._task.check_mode or time.monotonic() - began > timeout:
                    break
                pause(began)
        except ApiException as exc:
            return {"failed": True, "msg": f"Kubernetes API refused the proof of the chart values: {api_message(exc)}"}
        except Exception as exc:  # ApiUnavailable, and the client's kinds for an unusable kubeconfig or API
            return {"failed": True, "msg": f"cannot reach the Kubernetes API with {describe(params)}: {exc}"}
        if differs:
            return {
                "failed": True,
                "proven": proven,
                "differs": differs,
                "msg": "the chart values written are not applied: "
                + "; ".join(f"{d} (after {timeout} s)" for d in differs),
            }
        return {"changed": False, "proven": proven, "kept": notes}

    @staticmethod
    def not_proven(node: str, differs: list) -> dict:
        return {
            "failed": True,
            "proven": [],
            "differs": differs,
            "msg": f"node {node} does not run what was written: " + "; ".join(differs),
        }

    @staticmethod
    def api_evidence(api: KubeApi, node: str, engine: str, expect: list, timeout: int) -> dict:
        """The node and its apiserver mirror pod until they show what ``expect`` asks, or the timeout ends."""
        want_pod = any("file_hash" in item for item in expect)
        began = time.monotonic()
        while True:
            current = api.request("GET", f"/api/v1/nodes/{quote(node)}") or {}
            pod = None
            if want_pod:
                try:
                    pod = api.request("GET", f"/api/v1/namespaces/kube-system/pods/kube-apiserver-{quote(node)}")
                except ApiException as exc:
                    if exc.status != 404:
                        raise
            annotations = (current.get("metadata") or {}).get("annotations") or {}
            found = api_findings(expect, engine, annotations, pod)
            if not found["differs"] or time.monotonic() - began > timeout:
                if found["differs"]:
                    found["differs"] = [f"{line} (after {timeout} s)" for line in found["differs"]]
                return {**found, "node": current, "prints": fingerprints(engine, annotations, pod)}
            pause(began)
