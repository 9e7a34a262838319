#!/usr/bin/python
# Copyright: cargoship developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: engine_info
short_description: Which engine (k3s or RKE2) and version a host runs, and its service state
version_added: 0.1.0
description:
  - Runs C(k3s --version) or C(rke2 --version) and asks systemd about the engine's services.
  - Tolerates a host where nothing is installed (an install, not an upgrade). Nothing is changed.
  - Compares the installed version with O(desired_version) to tell an install, an upgrade,
    no change, or a downgrade apart.
  - With O(node_role), reads the settings cargoship depends on as the engine itself reads them (the
    unit's command line, then the config file and its C(.d) drop-ins, then the unit's environment, then
    the default), among them the node name (C(node-name), else the hostname lower-cased). A node name
    the engine makes up at start (C(with-node-id)) or that is not a valid node name fails the task.
author:
  - cargoship developers (@cargoship)
extends_documentation_fragment:
  - cargoship.engine._survey
  - cargoship.engine._attributes
  - cargoship.engine._attributes.no_diff
options:
  engine:
    description: The engine expected on the host.
    type: str
    required: true
    choices: [k3s, rke2]
  desired_version:
    description: The version the fleet should run, e.g. V(v1.30.2+k3s1). Omit to only report.
    type: str
  require_installed:
    description: Fail when the engine is not installed.
    type: bool
    default: false
  forbid_downgrade:
    description: Fail when the installed version is newer than O(desired_version).
    type: bool
    default: false
  node_role:
    description:
      - V(server) or V(agent), to read the settings of that engine service (RV(settings)). Omit to skip them.
    type: str
    choices: [server, agent]
"""

EXAMPLES = r"""
- name: Read the installed engine
  cargoship.engine.engine_info:
    engine: rke2
    desired_version: v1.30.2+rke2r1
"""

RETURN = r"""
installed:
  description: Whether the engine binary is on the host.
  returned: always
  type: bool
version:
  description: The installed version, e.g. V(v1.30.2+k3s1); null when not installed.
  returned: always
  type: str
plan:
  description: V(install), V(upgrade), V(same), V(downgrade), or V(unknown) without O(desired_version).
  returned: always
  type: str
settings:
  description:
    - With O(node_role), the engine's settings on this host, each as the engine resolves it, and for each
      where it came from (C(<name>_from)). C(node_name), C(with_node_id), C(config_file) (the config file the
      engine reads, and C(config_files) with its drop-ins in reading order), C(data_dir), C(private_registry),
      C(profile), C(write_kubeconfig) (where a server writes its admin kubeconfig), and C(config_problems)
      (config files that could not be read).
  returned: with O(node_role)
  type: dict
service:
  description: With O(node_role), the engine's systemd unit for that role on this host, e.g. V(k3s-agent) or V(rke2-server).
  returned: with O(node_role)
  type: str
services:
  description:
    - Each engine service of the host mapped to its state (absent units omitted). V(active) for a running
      engine; otherwise C(ActiveState) and C(SubState), e.g. V(inactive (dead)) or, for an engine that
      crash-loops or never finishes starting, V(activating (auto-restart)) or V(activating (start)).
  returned: always
  type: dict
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.cargoship.engine.plugins.module_utils._engine_info import MODULE_KWARGS, run
from ansible_collections.cargoship.engine.plugins.module_utils._outcome import finish


def main() -> None:
    finish(AnsibleModule(**MODULE_KWARGS), run)


if __name__ == "__main__":
    main()
