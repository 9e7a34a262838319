# Copyright: cargoship developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

from collections import defaultdict

from ansible.plugins.action import ActionBase


def duplicates(facts: dict, key: str) -> list[str]:
    seen = defaultdict(list)
    for host, host_facts in sorted(facts.items()):
        seen[host_facts.get(key)].append(host)
    return [
        f"{key.replace('_', ' ')} {value!r} is used by {', '.join(hosts)}"
        for value, hosts in seen.items()
        if len(hosts) > 1
    ]


class ActionModule(ActionBase):
    @staticmethod
    def facts_of(variables) -> dict:
        """What the detect_os and host_facts phases registered for one host."""
        os_info = variables.get("detect_os_info") or {}
        host_info = variables.get("host_facts_info") or {}
        return {
            **(host_info.get("network") or {}),
            "arch": (os_info.get("os") or {}).get("arch"),
            "clock_skew": (host_info.get("clock") or {}).get("skew") or 0,
            "firewall": host_info.get("firewall"),
        }

    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(("hosts", "max_clock_skew", "architectures"))

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        facts = {host: self.facts_of(task_vars["hostvars"][host]) for host in self._task.args["hosts"]}
        max_skew = int(self._task.args.get("max_clock_skew", 30))
        arches = self._task.args.get("architectures") or ["amd64", "arm64", "s390x"]
        problems = duplicates(facts, "hostname") + duplicates(facts, "private_address")
        for host, host_facts in sorted(facts.items()):
            if host_facts.get("arch") not in arches:
                problems.append(
                    f"{host}: CPU architecture {host_facts.get('arch')} is not one the engine ships for ({', '.join(arches)})"
                )
            skew = abs(float(host_facts.get("clock_skew", 0)))
            if skew > max_skew:
                problems.append(f"{host}: clock differs from the control host's by {skew:.0f}s (allowed {max_skew}s)")
            if (host_facts.get("firewall") or {}).get("input_policy") == "drop":
                problems.append(
                    f"{host}: the firewall drops incoming traffic by default; open the engine's ports or change the policy"
                )
            if not host_facts.get("private_address"):
                problems.append(f"{host}: no private address (no default route)")
        result.update(changed=False, problems=problems)
        if problems:
            result.update(failed=True, msg="host validation failed: " + "; ".join(problems))
        return result
