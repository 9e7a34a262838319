# Copyright: cargoship developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
name: run_option_default
short_description: The default of a cargoship inventory variable, from the collection's one table of them
version_added: 0.1.0
description:
  - Returns the fixed default of each cargoship variable named, as the collection's table of run options
    (C(plugins/plugin_utils/_run_options.py)) gives it. The same table writes the roles' defaults, their
    argument specs, the input validation and the docs, so a default is written once.
  - For the playbooks' own keywords and tasks outside a role (C(serial), the recover and unlock playbooks),
    where no role default applies. Inside a role the generated role defaults do this.
author:
  - cargoship developers (@cargoship)
options:
  _terms:
    description: Names of cargoship variables that have a fixed default.
    type: list
    elements: str
    required: true
"""

EXAMPLES = r"""
- name: Sync workers, at most the work concurrency at once
  hosts: cargoship_workers
  serial: "{{ cargoship_work_concurrency | default(lookup('cargoship.engine.run_option_default', 'cargoship_work_concurrency')) }}"
  tasks: []
"""

RETURN = r"""
_raw:
  description: The default of each variable named, in order.
  type: list
  elements: raw
"""

from ansible.errors import AnsibleLookupError
from ansible.plugins.lookup import LookupBase

from ansible_collections.cargoship.engine.plugins.plugin_utils._run_options import default


class LookupModule(LookupBase):
    def run(self, terms, variables=None, **kwargs):
        self.set_options(var_options=variables, direct=kwargs)
        found = []
        for name in terms:
            try:
                found.append(default(str(name)))
            except KeyError as exc:
                raise AnsibleLookupError(f"{name}: not a cargoship variable with a fixed default") from exc
        return found
