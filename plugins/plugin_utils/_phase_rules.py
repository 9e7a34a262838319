# Copyright: cargoship developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The few decisions a phase takes from what it read, written once: the real run's tasks use them through the
``cargoship.engine`` filters (plugins/filter/phase_rules.py), a dry run's play assessment calls them directly
(plugin_utils/_dry_run.py)."""

from __future__ import annotations

BOOL_TRUE = ("1", "true", "yes", "on", "y", "t")


def truthy(value: object) -> bool:
    """A boolean as Ansible reads one (a -e value comes as text)."""
    if isinstance(value, str):
        return value.strip().lower() in BOOL_TRUE
    return bool(value)


def engine_state(engine: dict) -> str:
    """The state of the node's engine unit (systemd's ActiveState), ``active`` if it was not read."""
    return (engine.get("services") or {}).get(engine.get("service", ""), "active")


def restart_reason(plan: dict, engine: dict, force: object = False) -> str | None:
    """Whether the node's engine restarts in its sync: None if not; else why, beyond its files: its engine
    is not running (``state``, the unit's state), or empty (its files need a restart, or cargoship_force)."""
    state = engine_state(engine)
    if not ((plan or {}).get("restart_required") or state != "active" or truthy(force)):
        return None
    return "" if state == "active" else state


def cis_refusal(host: str, engine: dict, engine_name: str, pod_security_given: bool, over_cis: object) -> str:
    """Why a CIS-hardened RKE2 server's pod-security admission file may not be replaced, or empty. ``engine`` is
    the server's engine facts (its settings' profile); only a server's, so call it for controllers only."""
    settings = (engine or {}).get("settings") or {}
    profile = str(settings.get("profile") or "")
    if engine_name != "rke2" or not pod_security_given or not profile.startswith("cis") or truthy(over_cis):
        return ""
    return (
        f"{host} runs RKE2 with profile {profile} ({settings.get('profile_from')}), whose pod-security admission "
        "file is rancher-restricted: cargoship_pod_security would replace it and weaken the cluster. Nothing was "
        "changed. Set cargoship_pod_security_over_cis to true to replace it anyway."
    )


def charts_kept(chart_values: object) -> list[str]:
    """The charts whose values cargoship keeps (``namespace/name``): those listed, but not as ``absent``."""
    named = chart_values if isinstance(chart_values, dict) else {}
    return [
        f"{(spec.get('namespace') if isinstance(spec, dict) else None) or 'kube-system'}/{chart}"
        for chart, spec in named.items()
        if spec != "absent"
    ]


KIND_WORDS = {
    "registries": "registries",
    "audit_policy": "audit policy",
    "pod_security": "pod security",
    "config": "engine config drop-in",
    "chart_values": "chart values",
}
NO_RESTART, IN_PLACE, DRAIN = "none", "in_place", "drain"


def restart_mode(plan: dict, engine: dict, force: object = False, setting: object = "drain") -> dict:
    """How the node's sync takes it out of service, and why: ``{"mode", "why"}``. ``none``: no restart (nothing
    to change, or only chart values, which the engine applies without one); ``in_place``: the engine restarts
    without a drain (cargoship_restart: in_place; the units use KillMode=process, so the pods' containers keep
    running, real-engines.md); ``drain``: cordoned and drained, then restarted. A node whose engine is not
    running is always drained: its pods may not be running, and the kubelet's view of them is stale."""
    changes = (plan or {}).get("changes") or []
    restarting = sorted({c.get("kind") for c in changes if c.get("restart")})
    words = ", ".join(KIND_WORDS.get(kind, str(kind)) for kind in restarting)
    reason = restart_reason(plan, engine, force)
    if reason is None:
        charts = any(c.get("kind") == "chart_values" for c in changes)
        why = "chart values only: applied without a restart" if charts else "nothing to change"
        return {"mode": NO_RESTART, "why": why}
    if reason:
        return {"mode": DRAIN, "why": f"its engine is {reason}: a node whose engine is not running is always drained"}
    cause = f"{words} changed" if words else ("cargoship_force restarts it" if truthy(force) else "its files changed")
    if str(setting) == IN_PLACE:
        return {"mode": IN_PLACE, "why": f"{cause}; cargoship_restart: in_place, so no drain: pods keep running"}
    return {"mode": DRAIN, "why": f"{cause}; cargoship_restart: drain"}
