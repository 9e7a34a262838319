# Copyright: cargoship developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The fleet map: which configuration each node runs, as the Kubernetes API shows it, against what the
inventory wants. Read from the API alone (the nodes' stamps and the engines' evidence), never from the hosts.

Each node is one of:

* ``proven``: a run proved it runs the inventory's desired state, and the engine's evidence is still the one
  it was proven with;
* ``changed since proven``: the stamp is the desired state's, but the engine started since with other
  arguments or files (its node-config-hash, RKE2's apiserver FILE_HASH differ from the stamp's);
* ``not the desired state``: proven to run another desired state than the inventory's (the inventory
  changed since, or the node was left out of the last run);
* ``unproven``: no run has proven it (never synced since cargoship proves, or synced with other tools);
* ``not in the inventory``: a node no inventory host is.
"""

from __future__ import annotations

from ansible_collections.cargoship.engine.plugins.plugin_utils._proof import fingerprints, read_stamp

PROVEN = "proven"
CHANGED = "changed since proven"
OTHER = "not the desired state"
UNPROVEN = "unproven"
UNKNOWN = "not in the inventory"
STATUSES = (PROVEN, CHANGED, OTHER, UNPROVEN, UNKNOWN)


def node_of(host: str, wanted: dict, nodes: dict, taken: set) -> str | None:
    """The node an inventory host is: the one whose stamp names the host, else the one of its name (or of
    its short name), else the one with its address among the node's addresses."""
    for name, node in nodes.items():
        if name not in taken and (node["stamp"] or {}).get("host") == host:
            return name
    for name in (host, host.split(".", 1)[0]):
        if name in nodes and name not in taken:
            return name
    address = wanted.get("address")
    for name, node in nodes.items():
        if name not in taken and address and address in node["addresses"]:
            return name
    return None


def node_summary(raw_node: dict, apiserver_pods: dict) -> dict:
    """What the map needs of a node: its stamp, the engine's fingerprints now, its addresses."""
    meta = raw_node.get("metadata") or {}
    annotations = meta.get("annotations") or {}
    engine = "rke2" if "rke2.io/node-args" in annotations else "k3s"
    addresses = [a.get("address") for a in (raw_node.get("status") or {}).get("addresses") or []]
    return {
        "stamp": read_stamp(annotations),
        "prints": fingerprints(engine, annotations, apiserver_pods.get(meta.get("name"))),
        "addresses": [a for a in addresses if a],
    }


def fleet_map(hosts: dict, nodes: dict) -> dict:
    """``hosts``: inventory host -> {role, digest, address}; ``nodes``: node name -> node_summary. The map:
    per node its host, role, status, the digest it was proven to run and the one the inventory wants; the
    nodes grouped by the digest they were proven to run; inventory hosts with no node."""
    taken: set = set()
    found: dict = {}
    without_node = []
    for host, wanted in sorted(hosts.items()):
        name = node_of(host, wanted, nodes, taken)
        if name is None:
            without_node.append(host)
            continue
        taken.add(name)
        node = nodes[name]
        stamp = node["stamp"]
        if stamp is None:
            status = UNPROVEN
        elif stamp["digest"] != wanted["digest"]:
            status = OTHER
        elif any(node["prints"].get(key) != value for key, value in stamp.items() if key in FINGERPRINT_KEYS):
            status = CHANGED
        else:
            status = PROVEN
        found[name] = {
            "host": host,
            "role": wanted["role"],
            "status": status,
            "desired": wanted["digest"],
            "proven": stamp["digest"] if stamp else None,
            "run": stamp.get("run") if stamp else None,
        }
    for name, node in nodes.items():
        if name not in taken:
            stamp = node["stamp"]
            found[name] = {
                "host": None,
                "role": None,
                "status": UNKNOWN,
                "desired": None,
                "proven": stamp["digest"] if stamp else None,
                "run": stamp.get("run") if stamp else None,
            }
    groups: dict = {}
    for name, entry in sorted(found.items()):
        groups.setdefault(entry["proven"] or "", []).append(name)
    return {
        "nodes": dict(sorted(found.items())),
        "by_digest": {digest: names for digest, names in sorted(groups.items()) if digest},
        "unproven": groups.get("", []),
        "hosts_without_node": without_node,
        "counts": {status: sum(1 for e in found.values() if e["status"] == status) for status in STATUSES},
        "converged": bool(found) and not without_node and all(e["status"] == PROVEN for e in found.values()),
    }


FINGERPRINT_KEYS = ("node_config_hash", "apiserver_file_hash")


def short(digest: str | None) -> str:
    return (digest or "")[: len("sha256:") + 12]


def map_lines(fleet: dict) -> list[str]:
    """The map as text, one line each: the groups by digest, then the nodes by status."""
    nodes = fleet["nodes"]
    desired = {e["desired"] for e in nodes.values() if e["desired"]}
    lines = [
        f"{len(nodes)} node{'' if len(nodes) == 1 else 's'} in the cluster; the inventory's desired state from its variables"
    ]
    for digest, names in fleet["by_digest"].items():
        mark = "the inventory's desired state" if digest in desired else "not a desired state of the inventory now"
        lines.append(f"  {short(digest)}  {len(names)} node(s): {', '.join(names)}  ({mark})")
    for status in STATUSES:
        names = [name for name, e in nodes.items() if e["status"] == status]
        if names:
            lines.append(f"{status}: {', '.join(names)}")
    if fleet["hosts_without_node"]:
        lines.append(f"inventory hosts with no node in the cluster: {', '.join(fleet['hosts_without_node'])}")
    lines.append(
        "every node runs the inventory's desired state, proven"
        if fleet["converged"]
        else "not every node is proven to run the inventory's desired state"
    )
    return lines
