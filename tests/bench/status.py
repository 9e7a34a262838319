"""Benchmark: `cargoship status` (the fleet map from the Kubernetes API alone) for fleets of many nodes.

    .venv/bin/python tests/bench/status.py --sizes 50,200,500 [--repeat 3]

Brings up one small lab (its API double and three hosts), then for each size adds that many nodes to the
API double (each with a stamp as a proof writes it) and as many hosts to the inventory (addresses that
answer nothing: status connects to no host), and times `cargoship status --json`, --repeat times (the
median kept). Prints the wall time and the statuses counted, as a check that every node was mapped.
Timing is measured here, never asserted in tests.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import yaml
from kubernetes import client, config

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests" / "lab"))
import labctl  # noqa: E402

STAMP = "cargoship.io/proven"


def fake_node(core, name: str, digest: str) -> None:
    stamp = json.dumps(
        {"digest": digest, "run": "bench", "kinds": ["registries"], "host": name, "node_config_hash": "H"}
    )
    annotations = {"k3s.io/node-args": json.dumps(["agent"]), "k3s.io/node-config-hash": "H", STAMP: stamp}
    body = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "annotations": annotations}, "spec": {}}
    core.create_node(body)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("--sizes", default="50,200,500", help="node counts, comma-separated")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    sizes = sorted(int(s) for s in args.sizes.split(","))
    lab = labctl.up(3, 1, "k3s")
    try:
        core = client.CoreV1Api(config.new_client_from_config(str(lab.state / "kubeconfig")))
        (lab.state / "group_vars").mkdir(exist_ok=True)
        shutil.copy(REPO / "examples" / "group_vars" / "all.yml", lab.state / "group_vars" / "all.yml")
        inventory = yaml.safe_load((lab.state / "inventory.yml").read_text())
        workers = inventory["all"]["children"]["workers"]["hosts"]
        made = 0
        print(f"{'nodes':>5} {'status':>8}  statuses")
        for size in sizes:
            for index in range(made, size):
                name = f"bench-{index:04d}"
                # An address from TEST-NET-1 (RFC 5737): nothing answers there.
                workers[name] = {"ansible_host": f"192.0.2.{index % 250 + 1}"}
                fake_node(core, name, "sha256:" + "0" * 64)
            made = size
            (lab.state / "inventory.yml").write_text(yaml.safe_dump(inventory, sort_keys=False))
            times, counts = [], {}
            for _run in range(args.repeat):
                started = time.monotonic()
                result = subprocess.run(
                    [
                        str(REPO / ".venv" / "bin" / "cargoship"),
                        "status",
                        "-i",
                        str(lab.state / "inventory.yml"),
                        "--json",
                    ],
                    capture_output=True,
                    text=True,
                    check=False,
                )
                times.append(time.monotonic() - started)
                if result.returncode != 0:
                    print(result.stdout + result.stderr)
                    return 1
                counts = json.loads(result.stdout)["counts"]
            median = sorted(times)[len(times) // 2]
            shown = ", ".join(f"{k} {v}" for k, v in counts.items() if v)
            print(f"{size + 3:>5} {median:>7.1f}s  {shown}")
    finally:
        labctl.down(log=lambda _msg: None)
    return 0


if __name__ == "__main__":
    sys.exit(main())
