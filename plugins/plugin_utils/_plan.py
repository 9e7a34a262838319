# Copyright: cargoship developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A reviewed plan: what a dry run found and decided, written down so that a later real run applies exactly it.

A plan holds, for each host, what its decision was made from (its fingerprint: the node's name, the engine,
its version and unit state, the digest of the host's desired state, each managed file as it was) and what
was decided (each file change, and how the node is restarted, with why); for the fleet, the hosts, the
nodes of the cluster and a salted, slow digest of the whole inventory's desired state. No credential is in it:
each host's desired state is hashed with its credentials masked (``masked_state``), a file that may hold one
is recorded by the hash of its masked content (module_utils/_engine_config.fingerprint_of), and the one digest
that covers credentials too is a PBKDF2, salted per plan.

The plan's digest is the sha256 of its canonical JSON. The file carries it; a file whose content does not
give the digest it carries was edited and is refused, as is one whose digest is not the one the user
reviewed (``expect_digest``). Applying a plan compares the plan with one made the same way from what the
hosts show now (``differences``), before anything is changed, and each node again before it is touched
(``host_differences``).
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets

from ansible_collections.cargoship.engine.plugins.module_utils._credentials import masked
from ansible_collections.cargoship.engine.plugins.module_utils._engine_config import secret_paths_of
from ansible_collections.cargoship.engine.plugins.plugin_utils._phase_rules import engine_state, restart_mode
from ansible_collections.cargoship.engine.plugins.plugin_utils._run_options import value as run_option

FORMAT = "cargoship-plan/1"
PBKDF2_ROUNDS = 200_000


class PlanError(Exception):
    """A plan file that cannot be applied: unreadable, not a plan, edited, or not the reviewed one."""


def canonical(value: object) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True, default=str)


def digest_of(plan: dict) -> str:
    return "sha256:" + hashlib.sha256(canonical(plan).encode()).hexdigest()


def masked_state(state: dict, role: str) -> dict:
    """A host's desired state as the plan shows it: every kind the inventory gives for a node of its role
    (chart values on controllers only), credentials masked (registry auth; chart values under secret-looking
    keys and under the paths cargoship_secret_paths marks)."""
    marked = [path.split(".") if isinstance(path, str) else list(path) for path in state.get("secret_paths") or []]
    shown = {}
    for kind, given in sorted(state.items()):
        if kind == "secret_paths" or (kind == "chart_values" and role != "controller"):
            continue
        if kind == "registries" and isinstance(given, dict):
            shown[kind] = masked(given, "registries")
        elif kind == "chart_values" and isinstance(given, dict):
            shown[kind] = {chart: masked_chart(chart, spec, marked) for chart, spec in given.items()}
        else:
            shown[kind] = given
    return shown


def masked_chart(chart: str, spec: object, marked: list) -> object:
    if not isinstance(spec, dict) or "values" not in spec:
        return spec
    return {**spec, "values": masked(spec["values"], "chart_values", marked=secret_paths_of(chart, marked))}


def inventory_digest(states: dict, salt: str) -> str:
    """A slow, salted digest of every host's whole desired state, credentials included: it changes when any
    value changes, a credential too, and the plan keeps nothing a guess could be checked against quickly."""
    text = canonical({host: states[host] for host in sorted(states)})
    key = hashlib.pbkdf2_hmac("sha256", text.encode(), bytes.fromhex(salt), PBKDF2_ROUNDS)
    return "pbkdf2-sha256:" + key.hex()


def host_entry(host: str, role: str, state: dict, engine: dict, compared: dict, mode: dict) -> dict:
    """One host's part of a plan: what the decision was made from and what was decided. ``engine`` is the
    engine_facts read (engine_info), ``compared`` the sync phase's read (engine_config, with its
    ``fingerprint``), ``mode`` the restart mode (plugin_utils/_phase_rules.restart_mode)."""
    settings = engine.get("settings") or {}
    return {
        "role": role,
        "node": settings.get("node_name") or host,
        "engine": state.get("engine"),
        "version": engine.get("version"),
        "service": engine.get("service"),
        "unit_state": engine_state(engine),
        "desired": "sha256:" + hashlib.sha256(canonical(masked_state(state, role)).encode()).hexdigest(),
        "files": dict(sorted((compared.get("fingerprint") or {}).items())),
        "changes": sorted(
            (
                {"path": c.get("path"), "kind": c.get("kind"), "action": c.get("action")}
                for c in compared.get("changes") or []
            ),
            key=lambda c: (str(c["path"]), str(c["kind"])),
        ),
        "restart": mode.get("mode"),
        "why": mode.get("why"),
    }


def mode_of(compared: dict, engine: dict, variables) -> dict:
    """The restart mode of a host, as node_sync decides it from the host's run options."""
    return restart_mode(
        compared, engine, run_option(variables, "cargoship_force"), run_option(variables, "cargoship_restart")
    )


def new_salt() -> str:
    return secrets.token_hex(16)


def make(
    hosts: dict, nodes: list, states: dict, salt: str, cluster: list = (), operation: str = "engine-config-sync"
) -> dict:
    """The plan: ``hosts`` maps each inventory host to its host_entry, ``nodes`` the cluster's node names,
    ``states`` each host's desired state (for the inventory's digest; not kept), ``cluster`` what the run would
    change through the API besides the nodes' sync (chart values no longer in the inventory deleted, profile
    labels set)."""
    return {
        "format": FORMAT,
        "operation": operation,
        "hosts": dict(sorted(hosts.items())),
        "nodes": sorted(nodes),
        "cluster": sorted(cluster),
        "inventory": {"salt": salt, "digest": inventory_digest(states, salt)},
    }


def dump(plan: dict) -> str:
    """The plan file's text: the digest, then the plan, readable (for a review) and canonical in its keys."""
    return json.dumps({"digest": digest_of(plan), "plan": plan}, indent=2, sort_keys=True, ensure_ascii=True) + "\n"


def write(path: str, plan: dict) -> str:
    """Write the plan file (mode 0600, replaced whole) and return its digest."""
    path = os.path.expanduser(path)
    directory = os.path.dirname(os.path.abspath(path))
    if os.path.islink(path):
        raise PlanError(f"{path} is a symbolic link; name the file itself")
    if not os.path.isdir(directory):
        raise PlanError(f"{path}: no such directory {directory}")
    temporary = os.path.join(directory, f".{os.path.basename(path)}.{secrets.token_hex(4)}.tmp")
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
            handle.write(dump(plan))
        os.replace(temporary, path)
    except BaseException:
        if os.path.exists(temporary):
            os.unlink(temporary)
        raise
    return digest_of(plan)


def load(path: str, expect_digest: str | None = None) -> tuple[dict, str]:
    """The plan in the file and its digest; PlanError if it cannot be read, is not a plan, was edited (its
    content does not give the digest it carries) or is not the reviewed one (``expect_digest``)."""
    path = os.path.expanduser(str(path))
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
    except OSError as exc:
        raise PlanError(f"cannot read the plan {path}: {exc.strerror}") from exc
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise PlanError(f"{path} is not a cargoship plan (not JSON: {exc})") from exc
    if not isinstance(data, dict) or not isinstance(data.get("plan"), dict) or data["plan"].get("format") != FORMAT:
        raise PlanError(f"{path} is not a cargoship plan of format {FORMAT}")
    plan = data["plan"]
    found = digest_of(plan)
    if data.get("digest") != found:
        raise PlanError(
            f"{path} was changed since it was written: its content's digest is {found}, not the {data.get('digest')} "
            "it carries. Make a new plan with a dry run (--plan-out) and review it."
        )
    if expect_digest and expect_digest.strip() != found:
        raise PlanError(
            f"{path} is not the reviewed plan: its digest is {found}, the reviewed one is {expect_digest.strip()}"
        )
    for key in ("hosts", "nodes", "cluster", "inventory"):
        if key not in plan:
            raise PlanError(f"{path} is not a complete cargoship plan (no {key})")
    return plan, found


def file_change(path: str, was: str, now: str) -> str:
    if was == "absent":
        return f"{path} was created since the plan"
    if now == "absent":
        return f"{path} was removed since the plan"
    return f"{path} changed since the plan"


def host_differences(host: str, planned: dict, now: dict) -> list[str]:
    """What differs between a host's entry in the plan and the one made from it now, one line each."""
    found = []
    for key, what in (
        ("role", "role"),
        ("node", "node name"),
        ("engine", "engine"),
        ("version", "engine version"),
        ("service", "engine unit"),
        ("unit_state", "engine unit state"),
    ):
        if planned.get(key) != now.get(key):
            found.append(f"{host}: {what} is {now.get(key)!s}, the plan found {planned.get(key)!s}")
    if planned.get("desired") != now.get("desired"):
        found.append(f"{host}: the inventory's desired state for it is not the plan's")
    files_then, files_now = planned.get("files") or {}, now.get("files") or {}
    for path in sorted(set(files_then) | set(files_now)):
        was, is_now = files_then.get(path, "not managed"), files_now.get(path, "not managed")
        if was != is_now:
            if "not managed" in (was, is_now):
                found.append(f"{host}: {path} is {'no longer' if is_now == 'not managed' else 'now'} a managed file")
            else:
                found.append(f"{host}: {file_change(path, was, is_now)}")
    if not found and (planned.get("changes") != now.get("changes") or planned.get("restart") != now.get("restart")):
        # Same files, same desired state, yet another decision: a run option or the rules differ.
        found.append(
            f"{host}: would now do {describe(now)}, the plan lists {describe(planned)} "
            "(a run option such as cargoship_restart or cargoship_force differs)"
        )
    return found


def describe(entry: dict) -> str:
    changes = ", ".join(f"{c['action']} {c['path']}" for c in entry.get("changes") or []) or "no file change"
    return f"{changes}; restart: {entry.get('restart')}"


def differences(planned: dict, now: dict) -> list[str]:
    """Every difference between the plan and one made now, each naming the host (or the fleet) and what."""
    found = []
    hosts_then, hosts_now = set(planned["hosts"]), set(now["hosts"])
    if hosts_now - hosts_then:
        found.append(f"hosts not in the plan: {', '.join(sorted(hosts_now - hosts_then))}")
    if hosts_then - hosts_now:
        found.append(f"hosts of the plan not in this run: {', '.join(sorted(hosts_then - hosts_now))}")
    nodes_then, nodes_now = set(planned["nodes"]), set(now["nodes"])
    if nodes_now - nodes_then:
        found.append(f"nodes joined the cluster since the plan: {', '.join(sorted(nodes_now - nodes_then))}")
    if nodes_then - nodes_now:
        found.append(f"nodes left the cluster since the plan: {', '.join(sorted(nodes_then - nodes_now))}")
    if planned["cluster"] != now["cluster"]:
        listed = "; ".join(now["cluster"]) or "nothing"
        found.append(
            f"the cluster: the run would now {listed}, the plan lists {'; '.join(planned['cluster']) or 'nothing'}"
        )
    for host in sorted(hosts_then & hosts_now):
        found += host_differences(host, planned["hosts"][host], now["hosts"][host])
    if not found and planned["inventory"].get("digest") != now["inventory"].get("digest"):
        found.append("the inventory's desired state is not the plan's in a value the plan does not show (a credential)")
    return found
