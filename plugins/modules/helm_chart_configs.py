#!/usr/bin/python
# Copyright: cargoship developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: helm_chart_configs
short_description: Delete the HelmChartConfig objects cargoship made for charts it no longer manages
version_added: 0.2.0
description:
  - Talks to the Kubernetes API over HTTPS (with the Python kubernetes client only where the credentials need
    it); run it on the control host (C(delegate_to) V(localhost)).
  - The engine applies a manifest dropped into a server's manifests directory, but removing the file
    deletes nothing. With O(state=pruned), every HelmChartConfig labelled
    C(app.kubernetes.io/managed-by=cargoship) that O(keep) does not name is deleted, with the AddOn the
    engine keeps for its manifest file (without that, the engine would not apply the same file again
    should it come back).
  - Run it only once no controller has the manifest any more, or a controller's engine applies it again.
  - Answers that mean "not yet" (dropped connections, timeouts, HTTP 429, 500, 502, 503, 504) are retried
    with backoff, honouring C(Retry-After), for up to 30 s a call; other refusals fail at once.
  - In check mode nothing is deleted; the module reports what it would delete.
author:
  - cargoship developers (@cargoship)
extends_documentation_fragment:
  - cargoship.engine._attributes
  - cargoship.engine._attributes.no_diff
  - cargoship.engine._kube_access
requirements:
  - kubernetes (Python client), for exec and auth-provider credentials, a proxy, merged kubeconfig files or the
    in-cluster account only (a token or a client certificate needs nothing beyond Python)
options:
  state:
    description: V(pruned) deletes what O(keep) does not name.
    type: str
    default: pruned
    choices: [pruned]
  keep:
    description: The charts cargoship manages, each as C(namespace/name).
    type: list
    elements: str
    default: []
"""

EXAMPLES = r"""
- name: Delete the chart values of charts removed from the inventory
  cargoship.engine.helm_chart_configs:
    keep:
      - kube-system/traefik
    kubeconfig: ~/.kube/config
  delegate_to: localhost
"""

RETURN = r"""
changes:
  description: What was (or in check mode would be) deleted, e.g. C(delete HelmChartConfig kube-system/traefik).
  returned: always
  type: list
  elements: str
"""

import traceback

from ansible.module_utils.basic import AnsibleModule, missing_required_lib

from ansible_collections.cargoship.engine.plugins.module_utils._desired_state import MANAGED_BY, chart_addon_name
from ansible_collections.cargoship.engine.plugins.module_utils._kube_access import (
    ARGUMENT_SPEC,
    LibraryMissing,
    api_client,
    describe,
)
from ansible_collections.cargoship.engine.plugins.module_utils._kube_rest import ApiException, ApiUnavailable, KubeApi

SELECTOR = ",".join(f"{key}={value}" for key, value in MANAGED_BY.items())


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "state": {"type": "str", "default": "pruned", "choices": ["pruned"]},
            "keep": {"type": "list", "elements": "str", "default": []},
            **ARGUMENT_SPEC,
        },
        supports_check_mode=True,
    )
    keep = {tuple(entry.split("/", 1)) for entry in module.params["keep"]}
    changes = []
    try:
        api = KubeApi(api_client(module.params))
        found = api.list_cluster_custom_object("helm.cattle.io", "v1", "helmchartconfigs", label_selector=SELECTOR).get(
            "items", []
        )
        for item in found:
            namespace, name = item["metadata"]["namespace"], item["metadata"]["name"]
            if (namespace, name) in keep:
                continue
            changes.append(f"delete HelmChartConfig {namespace}/{name}")
            if module.check_mode:
                continue
            try:
                api.delete_namespaced_custom_object("helm.cattle.io", "v1", namespace, "helmchartconfigs", name)
            except ApiException as exc:
                # 404: gone already (a delete that was retried after its connection dropped, or another run).
                if exc.status != 404:
                    raise
            try:
                api.delete_namespaced_custom_object(
                    "k3s.cattle.io", "v1", "kube-system", "addons", chart_addon_name(name, namespace)
                )
            except ApiException as exc:
                if exc.status != 404:
                    raise
    except ApiException as exc:
        module.fail_json(msg=f"cannot prune chart values through the API: {exc.status} {exc.reason}", changes=changes)
    except ApiUnavailable as exc:
        module.fail_json(msg=f"cannot reach the Kubernetes API with {describe(module.params)}: {exc}", changes=changes)
    except LibraryMissing:
        module.fail_json(msg=missing_required_lib("kubernetes"), exception=traceback.format_exc())
    except Exception as exc:  # the client raises many kinds for an unusable kubeconfig or API
        module.fail_json(
            msg=f"cannot reach the Kubernetes API with {describe(module.params)}: {exc}",
            exception=traceback.format_exc(),
        )
    module.exit_json(changed=bool(changes), changes=changes)


if __name__ == "__main__":
    main()
