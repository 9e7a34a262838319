# Copyright: cargoship developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

from ansible.errors import AnsibleError
from ansible.plugins.action import ActionBase

from ansible_collections.cargoship.engine.plugins.plugin_utils._run_options import default

GROUP_VARIABLES = {"controllers": "cargoship_controllers_group", "workers": "cargoship_workers_group"}


def group_name(variables, kind: str) -> str:
    value = variables.get(GROUP_VARIABLES[kind], default(GROUP_VARIABLES[kind]))
    if not isinstance(value, str) or not value:
        raise AnsibleError(f"{GROUP_VARIABLES[kind]}: expected a group name, got {value!r}")
    return value


class ActionModule(ActionBase):
    """Which inventory hosts are the cluster's controllers and workers, by the group names each host's
    own variables give (inventory, group_vars, host_vars or -e), and which of them this run works on."""

    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(("hosts",))

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        hostvars = task_vars["hostvars"]
        inventory_hosts = task_vars["groups"].get("all", [])
        if not inventory_hosts:
            return {**result, "failed": True, "msg": "no host to work on: the inventory has no hosts"}
        found = {"controllers": [], "workers": []}
        names_seen = {"controllers": set(), "workers": set()}
        api_hosts = []  # where each controller's API server is, as far as the inventory tells
        try:
            for host in inventory_hosts:
                variables = hostvars[host]
                member_of = set(variables.get("group_names") or [])
                roles = []
                for kind in ("controllers", "workers"):
                    name = group_name(variables, kind)
                    names_seen[kind].add(name)
                    if name in member_of:
                        roles.append(kind)
                if len(roles) == 2:
                    return {
                        **result,
                        "failed": True,
                        "msg": f"{host} is in both the controllers group "
                        f"({group_name(variables, 'controllers')!r}) and the workers group "
                        f"({group_name(variables, 'workers')!r}): a node is one or the other",
                    }
                if roles:
                    found[roles[0]].append(host)
                if roles == ["controllers"]:
                    api_hosts.append(str(variables.get("ansible_host") or host))
        except AnsibleError as exc:
            return {**result, "failed": True, "msg": f"cannot tell controllers from workers: {exc.message}"}
        selected = set(self._task.args.get("hosts") or [])
        targets = [h for h in found["controllers"] + found["workers"] if h in selected]
        if not targets:
            looked_for = " or ".join(
                f"{kind} group {', '.join(repr(n) for n in sorted(names_seen[kind]))}"
                for kind in ("controllers", "workers")
            )
            if not found["controllers"] and not found["workers"]:
                why = f"no inventory host is in the {looked_for} (set cargoship_controllers_group / cargoship_workers_group to your group names)"
            else:
                why = (
                    f"the hosts selected ({', '.join(sorted(selected)) or 'none'}) include no host of the {looked_for}"
                )
            return {**result, "failed": True, "msg": f"no host to work on: {why}"}
        result.update(
            changed=False,
            controllers=found["controllers"],
            workers=found["workers"],
            targets=targets,
            controller_addresses=api_hosts,
        )
        return result
