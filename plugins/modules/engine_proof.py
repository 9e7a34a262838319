#!/usr/bin/python
# Copyright: cargoship developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: engine_proof
short_description: Prove that a restarted node's engine runs what was written, then stamp and uncordon it
version_added: 0.3.0
description:
  - Runs after a node's engine restarted on new files and its node is Ready. For each kind of configuration the
    desired state names (registries; on servers audit policy and pod security), checks the evidence the engine
    left of what it loaded at its start against the files on disk.
  - On the host (M(cargoship.engine.engine_evidence)) - containerd's generated C(hosts.toml) files against the
    registries file's mirrors; on RKE2 the kube-apiserver static pod's C(FILE_HASH) against the files it names.
  - From the control host, in the Kubernetes API - the node's C(<engine>.io/node-args) annotation must show the
    values cargoship's config drop-in passes (and no longer those of a kind removed); on RKE2 the
    kube-apiserver mirror pod's C(FILE_HASH) must be the static pod's. The API is asked again, for up to
    O(timeout) seconds, until it shows them.
  - k3s shows no hash of the audit policy or pod security file it loaded; there the proof is the flag that
    names the file, said so in the proof's line.
  - A proven node is stamped with the annotation C(cargoship.io/proven) - the digest of the desired state the
    inventory gives it (credentials masked), the run, the kinds proven and the engine's own fingerprints
    (C(node-config-hash), on RKE2 the apiserver's C(FILE_HASH)) - and, if a cargoship run cordoned it,
    uncordoned in the same patch. A node that is not proven is left as it is, and the task fails naming
    what differs.
  - In check mode the evidence is read and nothing is patched.
  - Runs on the control host as an action (its API calls from there, the host's part through the connection).
author:
  - cargoship developers (@cargoship)
extends_documentation_fragment:
  - cargoship.engine._attributes
  - cargoship.engine._attributes.no_diff
  - cargoship.engine._kube_access
options:
  proves:
    description:
      - V(node) proves a restarted node (O(node), O(run_id) needed), then stamps and uncordons it.
      - V(chart_values) proves that helm-controller applied the chart values written (O(chart_values), or
        O(from_inventory) with O(with_charts)) - for each chart, the HelmChartConfig in the API is what was
        written and a C(helm-install-<chart>) job whose pod template's C(helmcharts.helm.cattle.io/configHash)
        is the hash of the HelmChart's and those values (as helm-controller computes it) succeeded. A chart
        with no HelmChart in the cluster is noted, not failed (nothing would apply its values). Nothing is
        changed.
    type: str
    default: node
    choices: [node, chart_values]
  node:
    description: The node's name in the cluster.
    type: str
  node_role:
    description: The engine's role on the host.
    type: str
    default: agent
    choices: [server, agent]
  layout:
    description: Where the engine keeps its files on this host, as M(cargoship.engine.engine_info) reads them.
    type: dict
  run_id:
    description: The run that proves the node, written in its stamp.
    type: str
  timeout:
    description: How long to wait, in seconds, for the API to show the evidence.
    type: int
    default: 60
  uncordon:
    description: Uncordon the node once proven, if a cargoship run cordoned it.
    type: bool
    default: true
  from_inventory:
    description:
      - Take O(engine) and the desired state (O(registries), O(audit_policy), O(pod_security), O(audit_log))
        from the host's C(cargoship_*) variables, as M(cargoship.engine.engine_config) does; the task's own
        arguments win.
    type: bool
    default: false
  engine:
    description: The engine on the host.
    type: str
    choices: [k3s, rke2]
  registries:
    description: The desired registries configuration, or V(absent); unset leaves registries unproven.
    type: raw
  audit_policy:
    description: The desired audit policy, or V(absent); unset leaves it unproven.
    type: raw
  pod_security:
    description: The desired pod security admission configuration, or V(absent); unset leaves it unproven.
    type: raw
  audit_log:
    description: The audit log retention (part of the digest of a node with an audit policy).
    type: dict
  chart_values:
    description: The chart values written, as C(cargoship_chart_values) gives them (O(proves=chart_values)).
    type: raw
  with_charts:
    description: With O(from_inventory), take O(chart_values) from the inventory too.
    type: bool
    default: false
"""

EXAMPLES = r"""
- name: Prove helm-controller applied the chart values written
  cargoship.engine.engine_proof:
    proves: chart_values
    from_inventory: true
    with_charts: true

- name: Prove the node runs what was written, then stamp and uncordon it
  cargoship.engine.engine_proof:
    from_inventory: true
    node: "{{ node_sync_node }}"
    node_role: server
    run_id: "{{ connect_run_id }}"
  become: true
"""

RETURN = r"""
proven:
  description:
    - "What was proven and how, one line per kind, e.g. C(audit policy: loaded (apiserver FILE_HASH matches)),
      C(registries: containerd hosts.toml for 2 registries matches)."
  returned: always
  type: list
  elements: str
differs:
  description: What the engine's evidence shows that is not what was written, one line per kind.
  returned: when the node is not proven
  type: list
  elements: str
kept:
  description: Charts whose values nothing applies (no HelmChart of their name), with O(proves=chart_values).
  returned: when there are such charts
  type: list
  elements: str
stamp:
  description: The stamp written on the node (JSON).
  returned: when the node is proven
  type: str
changes:
  description: The stamp, and the uncordon when there was one.
  returned: when the node is proven
  type: list
  elements: str
node_state:
  description: V(uncordoned), the node's sync window closed.
  returned: when the node is proven
  type: str
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.cargoship.engine.plugins.module_utils._kube_access import ARGUMENT_SPEC


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "proves": {"type": "str", "default": "node", "choices": ["node", "chart_values"]},
            "node": {"type": "str"},
            "node_role": {"type": "str", "default": "agent", "choices": ["server", "agent"]},
            "layout": {"type": "dict"},
            "run_id": {"type": "str"},
            "timeout": {"type": "int", "default": 60},
            "uncordon": {"type": "bool", "default": True},
            "from_inventory": {"type": "bool", "default": False},
            "engine": {"type": "str", "choices": ["k3s", "rke2"]},
            "registries": {"type": "raw"},
            "audit_policy": {"type": "raw"},
            "pod_security": {"type": "raw"},
            "audit_log": {"type": "dict"},
            "chart_values": {"type": "raw"},
            "with_charts": {"type": "bool", "default": False},
            **ARGUMENT_SPEC,
        },
        supports_check_mode=True,
    )
    module.fail_json(msg="engine_proof runs on the control host as an action; it cannot run as a module")


if __name__ == "__main__":
    main()
