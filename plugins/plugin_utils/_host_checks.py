# Copyright: cargoship developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The validate_hosts phase's checks of a fleet's hosts against each other, from what the detect_os and
host_facts phases read on each host. Used by its action (a real run) and by a dry run's play assessment."""

from __future__ import annotations

from collections import defaultdict

ARCHITECTURES = ("amd64", "arm64", "s390x")


def facts_of(os_info: dict | None, host_info: dict | None) -> dict:
    """What the checks use of one host: detect_os's answer (``os_info``) and host_facts's (``host_info``)."""
    os_info, host_info = os_info or {}, host_info or {}
    return {
        **(host_info.get("network") or {}),
        "arch": (os_info.get("os") or {}).get("arch"),
        "clock_skew": (host_info.get("clock") or {}).get("skew") or 0,
        "firewall": host_info.get("firewall"),
    }


def narrowed_clock(clock: dict, answered: float) -> dict:
    """host_info's ``clock`` with its ``skew`` narrowed by the round trip: the host read its clock (``epoch``)
    after the control host's reference moment (``epoch - skew``, taken before the call was sent) and before
    the answer came back (``answered``), so the true difference lies between ``epoch - answered`` and
    ``skew``. The smallest of them is kept: a slow connection or a busy host must not make a clock look
    further off than it can be (a call of several seconds would otherwise eat into the allowed skew)."""
    if not isinstance(clock, dict) or clock.get("skew") is None or clock.get("epoch") is None:
        return clock
    latest, earliest = float(clock["skew"]), float(clock["epoch"]) - answered
    least = earliest if earliest > 0 else latest if latest < 0 else 0.0
    return {**clock, "skew": least, "skew_range": [min(earliest, latest), latest]}


def duplicates(facts: dict, key: str) -> list[str]:
    seen = defaultdict(list)
    for host, host_facts in sorted(facts.items()):
        seen[host_facts.get(key)].append(host)
    return [
        f"{key.replace('_', ' ')} {value!r} is used by {', '.join(hosts)}"
        for value, hosts in seen.items()
        if len(hosts) > 1
    ]


def problems(facts: dict, max_skew: int = 30, arches: list[str] | tuple[str, ...] = ARCHITECTURES) -> list[str]:
    """Every problem of the hosts (``facts``: host -> facts_of), each naming its hosts."""
    found = duplicates(facts, "hostname") + duplicates(facts, "private_address")
    for host, host_facts in sorted(facts.items()):
        if host_facts.get("arch") not in arches:
            found.append(
                f"{host}: CPU architecture {host_facts.get('arch')} is not one the engine ships for ({', '.join(arches)})"
            )
        skew = abs(float(host_facts.get("clock_skew", 0)))
        if skew > max_skew:
            found.append(f"{host}: clock differs from the control host's by {skew:.0f}s (allowed {max_skew}s)")
        if (host_facts.get("firewall") or {}).get("input_policy") == "drop":
            found.append(
                f"{host}: the firewall drops incoming traffic by default; open the engine's ports or change the policy"
            )
        if not host_facts.get("private_address"):
            found.append(f"{host}: no private address (no default route)")
    return found


def outcome(facts: dict, max_skew: int = 30, arches: list[str] | tuple[str, ...] = ARCHITECTURES) -> dict:
    """The phase's result: ``problems``, and failed with every problem in its message if there is one."""
    found = problems(facts, max_skew, arches)
    result = {"changed": False, "problems": found}
    if found:
        result.update(failed=True, msg="host validation failed: " + "; ".join(found))
    return result
