"""Benchmark: the wall time and CPU a command costs on a running lab, split by where it was spent.

    CARGOSHIP_LAB_SLOT=5 .venv/bin/python tests/bench/cpu_of.py -- cargoship engine-config-sync -i INV --confirm
    CARGOSHIP_LAB_SLOT=5 .venv/bin/python tests/bench/cpu_of.py --idle 20     # what the lab costs doing nothing

Control host: the command and every process it started (their rusage once they ended: ansible-playbook,
its workers, SSH clients, modules run on the control host). Hosts: the CPU the lab slot's containers used
meanwhile (their cgroups' cpuacct.usage; sshd, sudo, the modules, the engine stand-ins). Machine: every
core's busy time from /proc/stat, which also counts anything else running (another lab, say). The figures
vary less between runs than wall time does on a machine whose cores the hosts share with the control host.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "lab"))

import labctl


def containers() -> list[str]:
    listed = labctl.podman(
        "ps", "--no-trunc", "--filter", f"label={labctl.SLOT.label}", "--format", "{{.ID}}"
    ).stdout.split()
    if not listed:
        raise SystemExit(f"cpu_of: no lab running in slot {labctl.SLOT.number} (labctl.py up)")
    return listed


def machine_cpu() -> float:
    """Busy seconds of every core so far (all but idle and iowait)."""
    fields = [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    return (sum(fields) - fields[3] - fields[4]) / os.sysconf("SC_CLK_TCK")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("--idle", type=float, help="measure this many seconds of nothing instead of a command")
    parser.add_argument("command", nargs="*")
    args = parser.parse_args()
    if not args.command and args.idle is None:
        parser.error("a command after --, or --idle SECONDS")
    ids = containers()
    hosts, machine, started = labctl.containers_cpu(ids), machine_cpu(), time.monotonic()
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    code = 0
    if args.command:
        code = subprocess.call(args.command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    else:
        time.sleep(args.idle)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    control = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    print(
        f"rc {code}  wall {time.monotonic() - started:.1f} s  control host CPU {control:.1f} s  "
        f"hosts' CPU {labctl.containers_cpu(ids) - hosts:.1f} s  machine CPU {machine_cpu() - machine:.1f} s"
    )
    return code


if __name__ == "__main__":
    sys.exit(main())
