# Copyright: cargoship developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A node's proof and its stamp, on the control host.

The desired state a node should run is summed up in one digest, worked out from the inventory alone (so
that ``cargoship status`` can compare without going to the hosts): the engine, the node's role and each
kind of configuration the inventory names, credentials masked (a changed password does not change the
digest: the digest is written where anyone who can read nodes can read it). Once the engine's evidence
proved that a restarted node runs what was written (module_utils/_engine_evidence.py), the node is stamped
with that digest, the run, and the engine's own fingerprints at that moment (its node-config-hash, RKE2's
apiserver FILE_HASH), so that a later restart with other files shows as unproven.
"""

from __future__ import annotations

import hashlib
import json

from ansible_collections.cargoship.engine.plugins.module_utils._credentials import masked
from ansible_collections.cargoship.engine.plugins.module_utils._desired_state import ABSENT

STAMP = "cargoship.io/proven"
NODE_KINDS = {"server": ("registries", "audit_policy", "pod_security"), "agent": ("registries",)}


def kinds_named(state: dict, node_role: str) -> list:
    """The kinds of configuration the desired state names for a node of this role (a value or absent)."""
    return [kind for kind in NODE_KINDS[node_role] if state.get(kind) is not None]


def desired_digest(state: dict, node_role: str) -> str:
    """The digest of what a node of this role should run: its engine and each kind the state names, with
    credentials masked, as canonical JSON."""
    summary: dict = {"engine": state.get("engine"), "node_role": node_role}
    for kind in kinds_named(state, node_role):
        value = state[kind]
        summary[kind] = value if value == ABSENT else masked(value, kind)
        if kind == "audit_policy" and value != ABSENT and state.get("audit_log"):
            summary["audit_log"] = state["audit_log"]
    text = json.dumps(summary, sort_keys=True, separators=(",", ":"), default=str)
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


def fingerprints(engine: str, annotations: dict, apiserver_pod: dict | None) -> dict:
    """The engine's own fingerprints of what it loaded, as the API shows them now."""
    found = {}
    config_hash = (annotations or {}).get(f"{engine}.io/node-config-hash")
    if config_hash:
        found["node_config_hash"] = config_hash
    if apiserver_pod is not None:
        containers = (apiserver_pod.get("spec") or {}).get("containers") or [{}]
        for item in containers[0].get("env") or []:
            if isinstance(item, dict) and item.get("name") == "FILE_HASH":
                found["apiserver_file_hash"] = item.get("value")
    return found


def stamp_text(digest: str, run_id: str, kinds: list, prints: dict) -> str:
    return json.dumps({"digest": digest, "run": run_id, "kinds": sorted(kinds), **prints}, sort_keys=True)


def read_stamp(annotations: dict) -> dict | None:
    """A node's stamp, or None when it has none (or one that is not cargoship's format)."""
    text = (annotations or {}).get(STAMP)
    try:
        stamp = json.loads(text) if text else None
    except ValueError:
        return None
    return stamp if isinstance(stamp, dict) and isinstance(stamp.get("digest"), str) else None
