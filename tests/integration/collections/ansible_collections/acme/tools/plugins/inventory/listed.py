# Copyright: cargoship developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
name: listed
short_description: Hosts and groups listed in a plugin file (a test collection's inventory plugin)
description:
  - Reads a C(*.listed.yml) file naming its groups, their hosts and variables.
options:
  plugin:
    description: The name of this plugin.
    required: true
    choices: [acme.tools.listed]
  groups:
    description: Group name -> host name -> host variables.
    type: dict
    default: {}
  vars:
    description: Variables for every host.
    type: dict
    default: {}
author:
  - cargoship developers
"""

from ansible.plugins.inventory import BaseInventoryPlugin


class InventoryModule(BaseInventoryPlugin):
    NAME = "acme.tools.listed"

    def verify_file(self, path):
        return super().verify_file(path) and path.endswith((".listed.yml", ".listed.yaml"))

    def parse(self, inventory, loader, path, cache=True):
        super().parse(inventory, loader, path, cache)
        self._read_config_data(path)
        for name, value in (self.get_option("vars") or {}).items():
            inventory.set_variable("all", name, value)
        for group, hosts in (self.get_option("groups") or {}).items():
            inventory.add_group(group)
            for host, variables in (hosts or {}).items():
                inventory.add_host(host, group=group)
                for name, value in (variables or {}).items():
                    inventory.set_variable(host, name, value)
