#!/usr/bin/python
# Copyright: cargoship developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: engine_evidence
short_description: Read on a host what its k3s or RKE2 engine shows of the configuration it loaded
version_added: 0.3.0
description:
  - Reads what the engine left on the host at its last start and compares it with the files on disk, for the
    kinds of configuration asked. Nothing is changed.
  - V(registries) - the C(hosts.toml) files containerd's registry configuration has, which the engine
    generates from its registries file at start (only files with the engine's "generated" header count),
    against the mirrors and endpoints the registries file lists. Of the registries file only the mirrors
    are read; its credentials are not.
  - V(audit_policy), V(pod_security) (servers) - the config drop-in cargoship writes; on RKE2 also the
    kube-apiserver static pod manifest the engine writes at start, its C(FILE_HASH) against the sha256 of
    the files its arguments name now.
  - Returns what this proves, what differs, and what the Kubernetes API must show for the rest of the proof
    (the node's C(node-args) annotation, the apiserver mirror pod's C(FILE_HASH)); the
    M(cargoship.engine.engine_proof) action checks that.
author:
  - cargoship developers (@cargoship)
extends_documentation_fragment:
  - cargoship.engine._attributes
  - cargoship.engine._attributes.no_diff
options:
  engine:
    description: The engine on the host.
    type: str
    required: true
    choices: [k3s, rke2]
  node_role:
    description: The engine's role on the host.
    type: str
    default: agent
    choices: [server, agent]
  layout:
    description:
      - Where the engine keeps its files on this host (C(config_file), C(data_dir), C(private_registry)), as
        M(cargoship.engine.engine_info) reads them from its settings; the engine's defaults otherwise.
    type: dict
  kinds:
    description: The kinds of configuration to read the evidence of.
    type: list
    elements: str
    default: []
    choices: [registries, audit_policy, pod_security]
  removed:
    description: The kinds of O(kinds) the desired state removes (V(absent)); their evidence must be gone.
    type: list
    elements: str
    default: []
    choices: [registries, audit_policy, pod_security]
"""

EXAMPLES = r"""
- name: Read what the engine loaded at its last start
  cargoship.engine.engine_evidence:
    engine: rke2
    node_role: server
    kinds: [registries, audit_policy]
  become: true
  register: evidence
"""

RETURN = r"""
proven:
  description: "What the host's evidence proves, one line per kind, e.g. C(registries: containerd hosts.toml for 2 registries matches)."
  returned: always
  type: list
  elements: str
differs:
  description: Where the evidence is not what the files on disk say, one line per kind.
  returned: always
  type: list
  elements: str
expect:
  description:
    - Per server-side kind, what the Kubernetes API must show - C(kind), C(title), C(node_args) (flag and value
      pairs the node's C(node-args) annotation must have), C(absent) (paths it must not name), and on RKE2
      C(file_hash) (the running kube-apiserver's C(FILE_HASH)).
  returned: always
  type: list
  elements: dict
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.cargoship.engine.plugins.module_utils._desired_state import InputError
from ansible_collections.cargoship.engine.plugins.module_utils._engine_evidence import host_findings, read_on_host


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "engine": {"type": "str", "required": True, "choices": ["k3s", "rke2"]},
            "node_role": {"type": "str", "default": "agent", "choices": ["server", "agent"]},
            "layout": {"type": "dict"},
            "kinds": {
                "type": "list",
                "elements": "str",
                "default": [],
                "choices": ["registries", "audit_policy", "pod_security"],
            },
            "removed": {
                "type": "list",
                "elements": "str",
                "default": [],
                "choices": ["registries", "audit_policy", "pod_security"],
            },
        },
        supports_check_mode=True,
    )
    p = module.params
    try:
        evidence = read_on_host(p["engine"], p["node_role"], p["layout"], p["kinds"], p["removed"])
    except InputError as exc:
        module.fail_json(msg=str(exc))
    except OSError as exc:
        module.fail_json(msg=f"cannot read the engine's evidence: {exc}")
    module.exit_json(changed=False, **host_findings(evidence))


if __name__ == "__main__":
    main()
