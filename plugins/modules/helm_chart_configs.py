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
    it), from the control host. It is an action plugin, which runs in the task's own process there,
    whatever host the task is for.
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

from ansible.module_utils.basic import AnsibleModule, missing_required_lib

from ansible_collections.cargoship.engine.plugins.module_utils._helm_chart_configs import ARGUMENTS, prune


def main() -> None:
    # Ansible runs the action plugin of this name (plugins/action/helm_chart_configs.py), in the task's own
    # process; this module runs the same code (module_utils/_helm_chart_configs.py) where it is called as a module.
    module = AnsibleModule(argument_spec=ARGUMENTS, supports_check_mode=True)
    module.exit_json(**prune(module, missing_required_lib))


if __name__ == "__main__":
    main()
