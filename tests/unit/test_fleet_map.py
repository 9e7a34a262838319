"""The fleet map (plugins/plugin_utils/_fleet_map.py): each node's status from its stamp and its engine's
evidence in the API against the inventory's desired state, without the hosts."""

from __future__ import annotations

import json

from ansible_collections.cargoship.engine.plugins.plugin_utils._fleet_map import fleet_map, map_lines, node_summary
from ansible_collections.cargoship.engine.plugins.plugin_utils._proof import STAMP, stamp_text


def node(name, stamp=None, config_hash="H", addresses=("10.0.0.1",), engine="k3s"):
    annotations = {f"{engine}.io/node-args": json.dumps(["agent"]), f"{engine}.io/node-config-hash": config_hash}
    if stamp is not None:
        annotations[STAMP] = stamp
    return {
        "metadata": {"name": name, "annotations": annotations},
        "status": {"addresses": [{"type": "InternalIP", "address": a} for a in addresses]},
    }


def stamp(digest, host, config_hash="H", file_hash=None):
    prints = {"host": host, "node_config_hash": config_hash}
    if file_hash:
        prints["apiserver_file_hash"] = file_hash
    return stamp_text(digest, "run-1", ["registries"], prints)


def summaries(*raw, pods=None):
    return {item["metadata"]["name"]: node_summary(item, pods or {}) for item in raw}


def test_each_node_gets_its_status_from_its_stamp_and_its_engines_evidence_now():
    hosts = {
        "c1": {"role": "controller", "digest": "sha256:c", "address": "10.0.0.1"},
        "w1": {"role": "worker", "digest": "sha256:w", "address": "10.0.0.2"},
        "w2": {"role": "worker", "digest": "sha256:w", "address": "10.0.0.3"},
        "w3": {"role": "worker", "digest": "sha256:w", "address": "10.0.0.4"},
        "w4": {"role": "worker", "digest": "sha256:w", "address": "10.0.0.9"},
    }
    pod = {"spec": {"nodeName": "c1", "containers": [{"env": [{"name": "FILE_HASH", "value": "F2"}]}]}}
    nodes = summaries(
        node("c1", stamp("sha256:c", "c1", file_hash="F1"), addresses=("10.0.0.1",), engine="rke2"),
        node("w1", stamp("sha256:w", "w1"), addresses=("10.0.0.2",)),
        node("w2", stamp("sha256:old", "w2"), addresses=("10.0.0.3",)),
        # w3's node has another name: found by its address; no stamp.
        node("ip-10-0-0-4", None, addresses=("10.0.0.4",)),
        node("stray", stamp("sha256:w", "gone"), addresses=("10.0.0.7",)),
        pods={"c1": pod},
    )
    fleet = fleet_map(hosts, nodes)
    statuses = {name: entry["status"] for name, entry in fleet["nodes"].items()}
    assert statuses == {
        "c1": "changed since proven",  # the apiserver's FILE_HASH is not the one it was proven with
        "w1": "proven",
        "w2": "not the desired state",
        "ip-10-0-0-4": "unproven",
        "stray": "not in the inventory",
    }
    assert fleet["nodes"]["ip-10-0-0-4"]["host"] == "w3"
    assert fleet["hosts_without_node"] == ["w4"]
    assert fleet["by_digest"] == {"sha256:c": ["c1"], "sha256:old": ["w2"], "sha256:w": ["stray", "w1"]}
    assert fleet["unproven"] == ["ip-10-0-0-4"] and not fleet["converged"]
    lines = map_lines(fleet)
    assert "unproven: ip-10-0-0-4" in lines and "inventory hosts with no node in the cluster: w4" in lines
    assert any(line.startswith("  sha256:old  1 node(s): w2  (not a desired state") for line in lines)


def test_a_node_restarted_on_other_arguments_is_no_longer_proven_and_a_fleet_all_proven_is_converged():
    hosts = {"w1": {"role": "worker", "digest": "sha256:w", "address": None}}
    proven = fleet_map(hosts, summaries(node("w1", stamp("sha256:w", "w1", config_hash="H"))))
    assert proven["converged"] and proven["counts"]["proven"] == 1
    restarted = fleet_map(hosts, summaries(node("w1", stamp("sha256:w", "w1", config_hash="H"), config_hash="H2")))
    assert restarted["nodes"]["w1"]["status"] == "changed since proven" and not restarted["converged"]
    # A stamp that is not cargoship's format is no stamp.
    broken = node("w1")
    broken["metadata"]["annotations"][STAMP] = "{not json"
    assert fleet_map(hosts, summaries(broken))["nodes"]["w1"]["status"] == "unproven"
