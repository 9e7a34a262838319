# Copyright: cargoship developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""helm_chart_configs' one state and its options: shared by its action plugin, which runs it in the task's own
process on the control host, and its module (the same code as a module, for its documentation and tests)."""

from __future__ import annotations

import traceback
from collections.abc import Callable

from ansible_collections.cargoship.engine.plugins.module_utils._desired_state import MANAGED_BY, chart_addon_name
from ansible_collections.cargoship.engine.plugins.module_utils._kube_access import (
    ARGUMENT_SPEC,
    LibraryMissing,
    api_client,
    describe,
)
from ansible_collections.cargoship.engine.plugins.module_utils._kube_rest import ApiException, ApiUnavailable, KubeApi

SELECTOR = ",".join(f"{key}={value}" for key, value in MANAGED_BY.items())

ARGUMENTS = {
    "state": {"type": "str", "default": "pruned", "choices": ["pruned"]},
    "keep": {"type": "list", "elements": "str", "default": []},
    **ARGUMENT_SPEC,
}


def _delete(api: KubeApi, group: str, namespace: str, plural: str, name: str) -> None:
    try:
        api.delete_namespaced_custom_object(group, "v1", namespace, plural, name)
    except ApiException as exc:
        # 404: gone already (a delete that was retried after its connection dropped, or another run).
        if exc.status != 404:
            raise


def prune(module, missing_library: Callable[[str], str]) -> dict:
    """Delete every HelmChartConfig cargoship labelled that ``keep`` does not name, with the AddOn the engine
    keeps for its manifest; the result. ``module``: ``params`` (validated against ARGUMENTS), ``check_mode`` and
    ``fail_json`` (which must not return). ``missing_library`` words the message for a missing Python package."""
    p = module.params
    keep = {tuple(entry.split("/", 1)) for entry in p["keep"]}
    changes: list[str] = []
    try:
        api = KubeApi(api_client(p))
        found = api.list_cluster_custom_object("helm.cattle.io", "v1", "helmchartconfigs", label_selector=SELECTOR)
        for item in found.get("items", []):
            namespace, name = item["metadata"]["namespace"], item["metadata"]["name"]
            if (namespace, name) in keep:
                continue
            changes.append(f"delete HelmChartConfig {namespace}/{name}")
            if module.check_mode:
                continue
            _delete(api, "helm.cattle.io", namespace, "helmchartconfigs", name)
            _delete(api, "k3s.cattle.io", "kube-system", "addons", chart_addon_name(name, namespace))
    except ApiException as exc:
        module.fail_json(msg=f"cannot prune chart values through the API: {exc.status} {exc.reason}", changes=changes)
    except ApiUnavailable as exc:
        module.fail_json(msg=f"cannot reach the Kubernetes API with {describe(p)}: {exc}", changes=changes)
    except LibraryMissing:
        module.fail_json(msg=missing_library("kubernetes"), exception=traceback.format_exc())
    except Exception as exc:  # the client raises many kinds for an unusable kubeconfig or API
        module.fail_json(
            msg=f"cannot reach the Kubernetes API with {describe(p)}: {exc}", exception=traceback.format_exc()
        )
    return {"changed": bool(changes), "changes": changes}
