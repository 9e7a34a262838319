"""The chaos soak: many rollouts on one lab, each changing the desired state at random while a fault picked at
random strikes at a random moment; after each, the documented recovery, then the invariants. A breach stops the
soak, naming the seed that repeats it.

    .venv/bin/python tests/soak/soak.py [--rollouts 20] [--seed S] [--hosts 10] [--controllers 3]
                                        [--engines k3s,rke2] [--log FILE]

``make soak`` runs it (not part of ``make test``; a short soak of fixed seeds is: tests/integration/test_soak.py).
Each rollout draws everything from ``random.Random(f"{seed}/{index}")``, so a seed and an index repeat a rollout
(on a lab in the same state: rollouts build on each other, so repeat a seed from its first rollout). Every
rollout is logged, one JSON line each: the change, the fault, its moment and whether it struck, the run's exit
code, the recovery and the invariants found.

The faults (``FAULTS``) and how each is recovered from, as docs/reliability.md documents it:

- ``ssh_cut``: a host's network link goes down (its network namespace's veth) while the run is on it; the run
  stops naming the node; once the link is back and the lost run's locks went stale, a rerun finishes;
- ``sigint`` / ``sigterm``: the command is interrupted; it puts back the nodes it had started on and releases
  its locks itself; a rerun finishes;
- ``sigkill``: the command is killed; its keeper ends ansible-playbook; the locks go stale; a rerun finishes;
- ``disk_full``: a host's engine configuration directory is full before the run; the run stops before that
  node is touched; freed, a rerun finishes;
- ``api_errors`` / ``api_resets``: the API double answers 429/5xx, or drops connections, for a few seconds;
  the run rides through; a rerun (with nothing to do) confirms;
- ``engine_hang``: the node's engine never signals READY at its next start (the unit's start would wait for
  ever); the start is bounded, the node rolled back, the rollout stopped; a rerun finishes;
- ``kubelet_never_back``: the node's kubelet does not come back after the restart; the node is rolled back; a
  rerun finishes;
- ``stale_lock``: a host holds a dead run's lock, untouched for an hour; the run takes it over;
- ``none``: no fault (the control for the others).

Beside the fault, about one rollout in four (``--skew-share``) has a host whose wall clock is off by 5 to 25 s,
ahead or behind (cargoship allows 30 s by default, ``cargoship_max_clock_skew``): a standing condition of a host
more than an event, set before the run and kept through the recovery and the dry run, drawn from a random source
of its own so that a seed's faults are what they were before it was drawn. The lab's hosts are containers on one
kernel, whose realtime clock is one for all (time namespaces cover only the monotonic and boot-time clocks): the
skew is what the host's processes read, through the lab's library (tests/lab/clock_skew.c), which the host
preloads while its clock is off (its engine and kubelet from their next start, which the rollout's restart of
the node brings).

The invariants (``check``), after each rollout and its recovery:

1. no node is cordoned, none carries cargoship's cordon mark;
2. every engine is active, every node Ready, none restarting;
3. every managed file is whole and cargoship's: right after the faulted run, each is either as it was before
   that run or as the recovery left it (never a third content), owned by root, mode 0600; after the recovery
   no hidden file of a write is left (a run cut off between its write and its renames leaves them, whole, for
   the next run to remove);
4. no lock on any host;
5. the nodes are the ones there were, and the pods are whole: each DaemonSet has its pod on every node, each
   ReplicaSet its replicas, every pod Running (a pod a drain evicted is replaced, not lost);
6. the recovery's run converged: a dry run with --detailed-exitcode finds nothing to do;
7. each run's report is truthful: a host it reports untouched had no engine start and no file changed, and a
   host it reports restarted did start its engine.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import datetime
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path[:0] = [str(REPO / "tests" / "lab"), str(REPO / "tests" / "integration")]

import labctl  # noqa: E402
import yaml  # noqa: E402
from labhosts import RunningLab, Shape  # noqa: E402

EXAMPLE = yaml.safe_load((REPO / "examples" / "group_vars" / "all.yml").read_text())
# Short windows, so that a lost run's locks go stale within a rollout, and a hung start is found in seconds.
TIMINGS = {
    "cargoship_lock_stale_after": 12,
    "cargoship_lock_touch_interval": 3,
    "cargoship_service_timeout": 25,
    "cargoship_ready_timeout": 60,
    "cargoship_drain_timeout": 60,
    "cargoship_proof_timeout": 30,
    "cargoship_engine_settle": 1,
}
KEEPALIVE = {"ANSIBLE_SSH_ARGS": "-o ControlMaster=auto -o ControlPersist=60s -o ServerAliveInterval=2"}
RUN_TIMEOUT = 900


class Breach(Exception):
    """An invariant did not hold."""


# -- the desired state, changed at random ----------------------------------------------------------------------


def start_state(engine: str) -> dict:
    """The desired state an engine's first rollout changes: the example's registries, which the soak converges
    before it (a starting point every rollout can change)."""
    return {"cargoship_engine": engine, "cargoship_registries": EXAMPLE["cargoship_registries"]}


def random_change(rng: random.Random, state: dict, engine: str) -> tuple[dict, list[str]]:
    """A new desired state: one or two kinds changed, added or removed (``absent``). Chart values are the
    engine's packaged ingress chart's (traefik on k3s, rke2-ingress-nginx on RKE2)."""
    new = copy.deepcopy(state)
    said = []
    for kind in rng.sample(["registries", "audit_policy", "pod_security", "chart_values"], rng.choice([1, 2])):
        name = f"cargoship_{kind}"
        if new.get(name) not in (None, "absent") and rng.random() < 0.25:
            new[name] = "absent"
            said.append(f"remove {kind}")
            continue
        # A value equal to the one in force changes nothing, and a fault that needs the change (an engine that
        # hangs on its restart) would meet nothing: such a draw is drawn again, so a rollout changes what it says.
        # A first draw that differs takes the random source as before: the seeds that never drew the same
        # value twice draw what they drew before this rule.
        value, what = random_value(rng, kind, engine)
        for _again in range(20):
            if value != new.get(name):
                break
            value, what = random_value(rng, kind, engine)
        new[name] = value
        said.append(what)
    return new, said


def random_value(rng: random.Random, kind: str, engine: str) -> tuple[object, str]:
    """A value of one kind of the desired state, and how the rollout says it."""
    if kind == "registries":
        registries = copy.deepcopy(EXAMPLE["cargoship_registries"])
        mirrors = rng.sample(["mirror-a", "mirror-b", "mirror-c"], rng.choice([1, 2]))
        registries["mirrors"]["docker.io"]["endpoint"] += [f"https://{m}.internal.example" for m in mirrors]
        return registries, f"registries via {', '.join(mirrors)}"
    if kind == "audit_policy":
        level = rng.choice(["Metadata", "Request", "RequestResponse"])
        return {"apiVersion": "audit.k8s.io/v1", "kind": "Policy", "rules": [{"level": level}]}, f"audit level {level}"
    if kind == "pod_security":
        level = rng.choice(["privileged", "baseline", "restricted"])
        policy = copy.deepcopy(EXAMPLE["cargoship_pod_security"])
        policy["plugins"][0]["configuration"]["defaults"]["enforce"] = level
        return policy, f"pod security enforce {level}"
    replicas = rng.randint(1, 3)
    chart = "traefik" if engine == "k3s" else "rke2-ingress-nginx"
    return {chart: {"values": {"deployment": {"replicas": replicas}}}}, f"{chart} replicas {replicas}"


def write_inventory(lab: RunningLab, directory: Path, state: dict) -> Path:
    (directory / "group_vars").mkdir(parents=True, exist_ok=True)
    (directory / "hosts.yml").write_text(lab.inventory.read_text())
    (directory / "group_vars" / "all.yml").write_text(yaml.safe_dump({**state, **TIMINGS}))
    return directory


# -- what the hosts and the API show ---------------------------------------------------------------------------

FILES_SCRIPT = r"""
import glob, hashlib, json, os, pwd, sys
engine = sys.argv[1]
paths = [f"/etc/rancher/{engine}/registries.yaml", f"/etc/rancher/{engine}/config.yaml.d/90-cargoship.yaml"]
paths += glob.glob(f"/var/lib/rancher/{engine}/server/cargoship-*")
paths += glob.glob(f"/var/lib/rancher/{engine}/server/manifests/cargoship-*")
found = {}
for path in sorted(set(paths)):
    if os.path.isfile(path):
        st = os.stat(path)
        found[path] = {"sha": hashlib.sha256(open(path, "rb").read()).hexdigest(),
                       "owner": pwd.getpwuid(st.st_uid).pw_name, "mode": oct(st.st_mode & 0o777)}
temporary = [p for d in (f"/etc/rancher/{engine}", f"/var/lib/rancher/{engine}/server")
             for p in glob.glob(f"{d}/**/.cargoship-*", recursive=True)]
log = f"/var/lib/rancher/{engine}/lab/starts.log"
starts = len(open(log).read().splitlines()) if os.path.exists(log) else 0
print(json.dumps({"files": found, "temporary": temporary, "starts": starts,
                  "lock": os.path.exists("/var/lib/cargoship/lock.json")}))
"""


def in_host(lab: RunningLab, name: str, *command: str, check: bool = True) -> subprocess.CompletedProcess:
    """A command inside a host's container, not over SSH (which a fault may have cut)."""
    return labctl.podman("exec", lab.hosts[name].container, *command, check=check)


def host_state(lab: RunningLab) -> dict:
    state = {}
    for name in lab.hosts:
        shown = in_host(lab, name, "python3", "-c", FILES_SCRIPT, lab.engine).stdout
        state[name] = json.loads(shown)
        active = in_host(lab, name, "systemctl", "is-active", lab.service(name), check=False).stdout.strip()
        state[name]["engine"] = active
    return state


def cluster_state(lab: RunningLab) -> dict:
    nodes = {}
    for node in lab.core.list_node().items:
        ready = next((c.status for c in node.status.conditions or [] if c.type == "Ready"), "Unknown")
        nodes[node.metadata.name] = {
            "unschedulable": bool(node.spec.unschedulable),
            "marked": "cargoship.io/cordoned-by" in (node.metadata.annotations or {}),
            "ready": ready,
        }
    pods = [p for p in lab.core.list_pod_for_all_namespaces().items if p.metadata.deletion_timestamp is None]
    return {"nodes": nodes, "pods": pods}


# -- the faults ------------------------------------------------------------------------------------------------


@dataclass
class Struck:
    """What a fault did in one rollout."""

    name: str
    target: str = ""
    moment: str = ""
    hit: bool = False
    at: float | None = None
    detail: str = ""


@dataclass
class Rollout:
    """One rollout's run, as the fault injector follows it."""

    lab: RunningLab
    rng: random.Random
    process: subprocess.Popen | None = None
    started: float = 0.0
    lines: list = field(default_factory=list)
    ended: threading.Event = field(default_factory=threading.Event)

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def node_line(self) -> str | None:
        """The node the run is on now, as its progress lines say (``sync_worker  w3``)."""
        for line in reversed(self.lines):
            parts = line.split()
            if len(parts) == 2 and parts[0] in ("sync_controller", "sync_worker"):
                return parts[1]
        return None


def wait_moment(rollout: Rollout, struck: Struck) -> bool:
    """Wait for the fault's moment: a time after the start, or a delay after the run reaches a node. False if
    the run ended first."""
    rng = rollout.rng
    if rng.random() < 0.4:
        delay = round(rng.uniform(1, 25), 1)
        struck.moment = f"{delay}s after the start"
        while rollout.elapsed() < delay:
            if rollout.ended.wait(0.2):
                return False
        return True
    nth, delay = rng.randint(1, 3), round(rng.uniform(0, 8), 1)
    struck.moment = f"{delay}s after the run reached its node number {nth}"
    seen: list = []
    while len(seen) < nth:
        node = rollout.node_line()
        if node and node not in seen:
            seen.append(node)
        if rollout.ended.wait(0.2):
            return False
    struck.detail = f"node {seen[-1]}"
    return not rollout.ended.wait(delay)


class Fault:
    name = "none"
    recovery = "rerun"

    def before(self, rollout: Rollout, struck: Struck) -> None:
        """Armed before the run starts."""

    def during(self, rollout: Rollout, struck: Struck) -> None:
        """In a thread while the run goes: wait for the moment, then strike."""

    def heal(self, rollout: Rollout, struck: Struck) -> None:
        """Undone once the run ended."""


class SshCut(Fault):
    name = "ssh_cut"

    def during(self, rollout, struck):
        if not wait_moment(rollout, struck):
            return
        struck.target = rollout.node_line() or rollout.rng.choice(list(rollout.lab.hosts))
        subprocess.run(["ip", "link", "set", rollout.lab.hosts[struck.target].veth, "down"], check=True)
        struck.hit, struck.at = True, rollout.elapsed()

    def heal(self, rollout, struck):
        if struck.target:
            subprocess.run(["ip", "link", "set", rollout.lab.hosts[struck.target].veth, "up"], check=True)


class Interrupt(Fault):
    def __init__(self, sig: signal.Signals) -> None:
        self.sig = sig
        self.name = {signal.SIGINT: "sigint", signal.SIGTERM: "sigterm", signal.SIGKILL: "sigkill"}[sig]

    def during(self, rollout, struck):
        if wait_moment(rollout, struck) and rollout.process.poll() is None:
            rollout.process.send_signal(self.sig)
            struck.hit, struck.at = True, rollout.elapsed()


class DiskFull(Fault):
    name = "disk_full"

    def before(self, rollout, struck):
        lab = rollout.lab
        struck.target = rollout.rng.choice(list(lab.hosts))
        directory = f"/etc/rancher/{lab.engine}"
        nsenter(
            lab,
            struck.target,
            f"mkdir -p /run/full-disk && cp -a {directory}/. /run/full-disk/ && "
            f"mount -t tmpfs -o size=256k,mode=0755 full-disk {directory} && cp -a /run/full-disk/. {directory}/ && "
            f"(dd if=/dev/zero of={directory}/.filler bs=4k 2>/dev/null || true)",
        )
        struck.hit, struck.at, struck.moment = True, 0.0, "before the run"
        struck.detail = f"{directory} full"

    def heal(self, rollout, struck):
        lab = rollout.lab
        directory = f"/etc/rancher/{lab.engine}"
        # What the run left on the full directory is kept: it is what the host has.
        nsenter(
            lab,
            struck.target,
            f"rm -f {directory}/.filler && rm -rf /run/full-disk && mkdir -p /run/full-disk && "
            f"cp -a {directory}/. /run/full-disk/ && umount {directory} && cp -a /run/full-disk/. {directory}/ && "
            "rm -rf /run/full-disk",
        )


def nsenter(lab: RunningLab, name: str, command: str) -> None:
    """A command in a host's mount namespace, as root of the machine (a tmpfs mounted there is the host's)."""
    pid = labctl.podman("inspect", "--format", "{{.State.Pid}}", lab.hosts[name].container).stdout.strip()
    subprocess.run(["nsenter", "-t", pid, "-m", "sh", "-c", command], check=True, capture_output=True, text=True)


class ApiFault(Fault):
    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.name = "api_errors" if kind == "status" else "api_resets"

    def during(self, rollout, struck):
        if not wait_moment(rollout, struck):
            return
        seconds = rollout.rng.randint(3, 12)
        fault = {"kind": self.kind, "seconds": seconds}
        if self.kind == "status":
            fault["status"] = rollout.rng.choice([429, 500, 502, 503, 504])
        rollout.lab.api_faults(fault)
        struck.hit, struck.at = True, rollout.elapsed()
        struck.detail = json.dumps(fault)

    def heal(self, rollout, struck):
        rollout.lab.api_faults()


class EngineSwitch(Fault):
    """A lab switch on the node the run reaches first (tests/lab/engine/fake_engine.py), undone once a start of
    its engine read it (the engine logs ``marker`` then), so that the rollback's own start is a normal one. It
    struck if a start read it."""

    def __init__(self, name: str, switch: str, content: str, marker: str) -> None:
        self.name, self.switch, self.content, self.marker = name, switch, content, marker

    def during(self, rollout, struck):
        lab = rollout.lab
        deadline = time.monotonic() + 300
        while not rollout.ended.is_set() and time.monotonic() < deadline:
            node = rollout.node_line()
            if node:
                struck.target, struck.moment = node, f"when the run reached {node}"
                break
            time.sleep(0.2)
        if not struck.target:
            return
        # The host's own clock, which its journal stamps by (it may be skewed: drawn_skew).
        since = in_host(lab, struck.target, "date", "+%s").stdout.strip()
        in_host(lab, struck.target, "sh", "-c", f"echo {self.content} > {self.switch}")
        while not rollout.ended.is_set() and time.monotonic() < deadline:
            if self.read_by_a_start(lab, struck.target, since):
                struck.hit, struck.at = True, rollout.elapsed()
                break
            time.sleep(0.5)
        self.heal(rollout, struck)

    def read_by_a_start(self, lab, name: str, since: str) -> bool:
        journal = f"journalctl -u {lab.service(name)} -o cat --since @{since} | grep -c '{self.marker}'"
        return in_host(lab, name, "sh", "-c", journal, check=False).stdout.strip() not in ("", "0")

    def heal(self, rollout, struck):
        if struck.target:
            in_host(rollout.lab, struck.target, "rm", "-f", self.switch, check=False)


class StaleLock(Fault):
    name = "stale_lock"

    def before(self, rollout, struck):
        struck.target = rollout.rng.choice(list(rollout.lab.hosts))
        dead = {"run_id": "dead-run", "holder": {"user": "soak", "pid": 1}, "stale_after": 60, "touch_interval": 10}
        in_host(
            rollout.lab,
            struck.target,
            "sh",
            "-c",
            f"mkdir -p /var/lib/cargoship && echo '{json.dumps(dead)}' > /var/lib/cargoship/lock.json "
            "&& touch -d '-1 hour' /var/lib/cargoship/lock.json",
        )
        struck.hit, struck.at, struck.moment = True, 0.0, "before the run"


FAULTS = {
    fault.name: fault
    for fault in (
        Fault(),
        SshCut(),
        Interrupt(signal.SIGINT),
        Interrupt(signal.SIGTERM),
        Interrupt(signal.SIGKILL),
        DiskFull(),
        ApiFault("status"),
        ApiFault("reset"),
        # The engine never signals READY at this start (its unit would wait for ever).
        EngineSwitch("engine_hang", "/etc/cargoship-lab/start-delay", "3600", marker="start-up delayed"),
        EngineSwitch("kubelet_never_back", "/etc/cargoship-lab/kubelet-down", "1", marker="kubelet not started"),
        StaleLock(),
    )
}


# -- a host's clock ---------------------------------------------------------------------------------------------

CLOCK_SKEW_SHARE = 0.25
# Within the 30 s cargoship allows by default, less the seconds between the control host's reading and the host's.
CLOCK_SKEW_MAX = 25


def drawn_skew(seed: str, index: int, hosts: list[str], share: float = CLOCK_SKEW_SHARE) -> dict | None:
    """The host whose clock is off in this rollout, and by how many seconds; None for none."""
    rng = random.Random(f"{seed}/{index}/clock")
    if rng.random() >= share:
        return None
    return {"host": rng.choice(sorted(hosts)), "seconds": rng.choice((-1, 1)) * rng.randint(5, CLOCK_SKEW_MAX)}


# -- one rollout -----------------------------------------------------------------------------------------------


def run_command(rollout: Rollout, inventory: Path, report: Path, fault: Fault, struck: Struck) -> int:
    """The real run, with the fault's thread beside it; its exit code."""
    env = {**os.environ, **KEEPALIVE}
    command = ["cargoship", "engine-config-sync", "-i", str(inventory), "--confirm", "--report-json", str(report)]
    rollout.started = time.monotonic()
    rollout.process = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, start_new_session=True
    )
    striker = threading.Thread(target=fault.during, args=(rollout, struck), daemon=True)
    striker.start()
    for line in rollout.process.stdout:
        rollout.lines.append(line.rstrip("\n"))
    code = rollout.process.wait(timeout=RUN_TIMEOUT)
    rollout.ended.set()
    striker.join(timeout=60)
    return code


def wait_until(condition, what: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise Breach(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(1)


def recover(lab: RunningLab, inventory: Path, directory: Path, index: int) -> tuple[int, dict, str]:
    """The documented recovery: once the lost run's locks went stale (nothing touches them), a rerun. Its exit
    code, report and output."""
    wait_until(lambda: not keepers_alive(), "the killed run's lock keeper to end", 60)
    stale = TIMINGS["cargoship_lock_stale_after"] + 2
    wait_until(
        lambda: all((age := lock_age(lab, name)) is None or age > stale for name in lab.hosts),
        "the lost run's locks to go stale",
        120,
    )
    report = directory / f"recovery-{index}.json"
    result = subprocess.run(
        ["cargoship", "engine-config-sync", "-i", str(inventory), "--confirm", "--report-json", str(report)],
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT,
        check=False,
        stdin=subprocess.DEVNULL,
    )
    shown = json.loads(report.read_text()) if report.exists() else {}
    return result.returncode, shown, result.stdout + result.stderr


def keepers_alive() -> bool:
    found = subprocess.run(["pgrep", "-f", "_lock_keeper.py"], capture_output=True, text=True, check=False)
    slot = f"CARGOSHIP_LAB_SLOT={labctl.SLOT.number}".encode()
    for pid in found.stdout.split():
        try:
            if slot in Path(f"/proc/{pid}/environ").read_bytes().split(b"\0"):
                return True
        except OSError:
            continue
    return False


def lock_age(lab: RunningLab, name: str) -> float | None:
    shown = in_host(
        lab,
        name,
        "sh",
        "-c",
        "test -e /var/lib/cargoship/lock.json && echo $(( $(date +%s) - $(stat -c %Y /var/lib/cargoship/lock.json) ))",
        check=False,
    ).stdout.strip()
    return float(shown) if shown else None


# -- the invariants --------------------------------------------------------------------------------------------


def reported_hosts(report: dict) -> dict:
    """Per host, from a run's report: whether it reports a restart of the host's engine, and whether it reports
    the host untouched (no change in any phase, not failed)."""
    found: dict = {}
    for phase in report.get("phases") or []:
        for host, entry in (phase.get("hosts") or {}).items():
            seen = found.setdefault(host, {"restarted": False, "touched": False})
            changes = [c if isinstance(c, str) else json.dumps(c) for c in entry.get("changes") or []]
            if phase["name"] in ("sync_controller", "sync_worker") and (changes or entry.get("status") == "failed"):
                seen["touched"] = True
            if any(c.startswith(("drain and restart ", "restart ")) for c in changes):
                seen["restarted"] = True
    return found


def check(
    lab, before: dict, during: dict, after: dict, cluster_before: dict, cluster: dict, reports: list
) -> list[str]:
    """Every invariant that does not hold, each a line naming the host, node or pod."""
    found = []
    for name, node in cluster["nodes"].items():
        if node["unschedulable"] or node["marked"]:
            found.append(f"node {name} left cordoned{' by cargoship' if node['marked'] else ''}")
        if node["ready"] != "True":
            found.append(f"node {name} is not Ready ({node['ready']})")
    if set(cluster["nodes"]) != set(cluster_before["nodes"]):
        found.append(f"the nodes changed: {sorted(cluster_before['nodes'])} -> {sorted(cluster['nodes'])}")
    for name, shown in after.items():
        if shown["engine"] != "active":
            found.append(f"{name}: engine {shown['engine']}")
        if shown["lock"]:
            found.append(f"{name}: a lock is left")
        # A run cut off between writing its new files beside the old ones and renaming them leaves those hidden
        # files (whole, never read by the engine); the next run removes them: none may be left after it.
        for path in shown["temporary"]:
            found.append(f"{name}: temporary file {path} left after the recovery")
        for state, when in ((during[name], "after the faulted run"), (shown, "after the recovery")):
            for path, item in state["files"].items():
                if item["owner"] != "root" or item["mode"] != "0o600":
                    found.append(f"{name}: {path} is {item['owner']} {item['mode']} {when}, not root's 0600")
        # Right after the faulted run, each file is as it was before it, or as the recovery left it (whole).
        for path in set(during[name]["files"]) | set(before[name]["files"]):
            mid = during[name]["files"].get(path, {}).get("sha")
            allowed = {before[name]["files"].get(path, {}).get("sha"), shown["files"].get(path, {}).get("sha")}
            if mid not in allowed:
                found.append(f"{name}: {path} after the faulted run is neither its previous nor its final content")
    found += pods_problems(lab, cluster)
    # Truthful reports: untouched hosts had no start and no file change; restarted hosts started.
    for label, report, state_before, state_after in reports:
        for host, seen in reported_hosts(report).items():
            if host not in state_after:
                continue
            started = state_after[host]["starts"] > state_before[host]["starts"]
            files_changed = state_after[host]["files"] != state_before[host]["files"]
            if not seen["touched"] and (started or files_changed) and report.get("phases"):
                found.append(
                    f"{label}: the report shows {host} untouched, but its {'engine started' if started else 'files changed'}"
                )
            if seen["restarted"] and not started:
                found.append(f"{label}: the report shows {host} restarted, but its engine did not start")
    return found


def settled(lab: RunningLab) -> bool:
    cluster = cluster_state(lab)
    return all(node["ready"] == "True" for node in cluster["nodes"].values()) and not pods_problems(lab, cluster)


def pods_problems(lab: RunningLab, cluster: dict) -> list[str]:
    found = []
    pods = cluster["pods"]
    nodes = set(cluster["nodes"])
    for ds in lab.apps.list_daemon_set_for_all_namespaces().items:
        on = {
            p.spec.node_name for p in pods if any(o.uid == ds.metadata.uid for o in p.metadata.owner_references or [])
        }
        if on != nodes:
            found.append(f"DaemonSet {ds.metadata.name}: pods on {sorted(on)}, not on every node")
    for rs in lab.apps.list_replica_set_for_all_namespaces().items:
        owned = [p for p in pods if any(o.uid == rs.metadata.uid for o in p.metadata.owner_references or [])]
        if len(owned) != (rs.spec.replicas or 0):
            found.append(f"ReplicaSet {rs.metadata.name}: {len(owned)} pods, not {rs.spec.replicas}")
    for pod in pods:
        if (pod.status.phase or "") != "Running":
            found.append(f"pod {pod.metadata.namespace}/{pod.metadata.name} is {pod.status.phase}")
    return found


def drawn(seed: str, index: int, state: dict, engine: str, only: str | None = None) -> tuple:
    """What a rollout draws: its random source (for the moments), the new desired state, the change said, the
    fault."""
    rng = random.Random(f"{seed}/{index}")
    new_state, change = random_change(rng, state, engine)
    fault = FAULTS[only] if only else FAULTS[rng.choice(sorted(FAULTS))]
    # How the rollout goes: workers at once, and restarts drained or in place.
    new_state["cargoship_work_concurrency"] = rng.choice([1, 2, "50%"])
    new_state["cargoship_restart"] = rng.choice(["drain", "in_place"])
    change = [*change, f"{new_state['cargoship_restart']}, {new_state['cargoship_work_concurrency']} at once"]
    return rng, new_state, change, fault


def rollout(
    lab: RunningLab,
    state: dict,
    seed: str,
    index: int,
    directory: Path,
    log,
    only: str | None = None,
    skew_share: float = CLOCK_SKEW_SHARE,
) -> dict:
    """One rollout, with a host's clock off if one is drawn; the new desired state. Raises Breach."""
    skew = drawn_skew(seed, index, list(lab.hosts), skew_share)
    with lab.clock_off(skew["host"], skew["seconds"]) if skew else contextlib.nullcontext():
        return faulted_rollout(lab, state, seed, index, directory, log, only, skew)


def faulted_rollout(
    lab: RunningLab, state: dict, seed: str, index: int, directory: Path, log, only: str | None, skew: dict | None
) -> dict:
    """The rollout's run with its fault, the recovery and the invariants (``skew``: the host's clock that is off)."""
    rng, new_state, change, fault = drawn(seed, index, state, lab.engine, only)
    inventory = write_inventory(lab, directory / f"inventory-{index}", new_state)
    struck = Struck(fault.name)
    record = {
        "seed": seed,
        "rollout": index,
        "engine": lab.engine,
        "change": change,
        "fault": fault.name,
        "clock_skew": skew,
    }
    before, cluster_before = host_state(lab), cluster_state(lab)
    follow = Rollout(lab, rng)
    report_path = directory / f"run-{index}.json"
    started = time.monotonic()
    try:
        fault.before(follow, struck)
        code = run_command(follow, inventory, report_path, fault, struck)
    finally:
        follow.ended.set()
        fault.heal(follow, struck)
    record.update(struck=struck.__dict__, rc=code, seconds=round(time.monotonic() - started, 1))
    during = host_state(lab)
    report = json.loads(report_path.read_text()) if report_path.exists() else {}
    code_after, recovered, output = recover(lab, inventory, directory, index)
    record["recovery"] = {"how": fault.recovery, "rc": code_after}
    if code_after != 0:
        record["breach"] = [f"the recovery's run failed (rc {code_after}): {output[-1500:]}"]
        log(record)
        raise Breach(record["breach"][0])
    after = host_state(lab)
    # A kubelet reports its node again within its 10-s status update once its network is back.
    wait_until(lambda: settled(lab), "every node Ready and the pods whole", 90)
    cluster = cluster_state(lab)
    dry = subprocess.run(
        ["cargoship", "engine-config-sync", "-i", str(inventory), "--dry-run", "--detailed-exitcode"],
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT,
        check=False,
        stdin=subprocess.DEVNULL,
    )
    found = check(
        lab,
        before,
        during,
        after,
        cluster_before,
        cluster,
        [("the faulted run", report, before, during), ("the recovery's run", recovered, during, after)],
    )
    if dry.returncode != 0:
        found.append(f"the dry run after the recovery is not converged (rc {dry.returncode})")
    record["breach"] = found
    log(record)
    if found:
        raise Breach("; ".join(found))
    return new_state


def soak(
    seed: str,
    rollouts: int,
    engines: list[str],
    hosts: int,
    controllers: int,
    log_path: Path,
    lab: RunningLab | None = None,
    only: str | None = None,
    skew_share: float = CLOCK_SKEW_SHARE,
) -> list[dict]:
    """Run the soak; its records. A lab given is used as it is (one engine); else one is brought up per engine
    and taken down at the end."""
    records: list[dict] = []
    directory = Path(tempfile.mkdtemp(prefix="cargoship-soak-"))
    log_path.parent.mkdir(parents=True, exist_ok=True)

    def log(record: dict) -> None:
        records.append(record)
        with log_path.open("a", encoding="utf-8") as handle:
            handle.write(json.dumps(record, default=str) + "\n")
        struck = record["struck"]
        skew = record.get("clock_skew")
        clock = f" ({skew['host']}'s clock {skew['seconds']:+d} s)" if skew else ""
        print(
            f"[{record['rollout']:>2}] {record['engine']:<4} {', '.join(record['change']):<60} "
            f"{record['fault'] + clock:<18} {'struck ' + struck['moment'] if struck['hit'] else 'missed':<52} "
            f"rc {record['rc']} -> recovery rc {record['recovery']['rc']}; "
            f"{'BREACH: ' + '; '.join(record['breach']) if record['breach'] else 'invariants hold'}",
            flush=True,
        )

    per_engine = [engines[i * len(engines) // rollouts] for i in range(rollouts)]
    own = lab is None
    try:
        index = 0
        for engine in dict.fromkeys(per_engine):
            if own:
                if lab is not None:
                    lab.close_connections()
                labctl.down(log=lambda _msg: None)
                lab = RunningLab(labctl.up(hosts, controllers, engine), Shape(hosts, controllers, engine))
            state = start_state(lab.engine)
            first = write_inventory(lab, directory / f"start-{engine}", state)
            started = subprocess.run(
                ["cargoship", "engine-config-sync", "-i", str(first), "--confirm"],
                capture_output=True,
                text=True,
                timeout=RUN_TIMEOUT,
                check=False,
                stdin=subprocess.DEVNULL,
            )
            if started.returncode != 0:
                raise Breach(f"the soak's first run on {engine} failed: {started.stdout[-2000:]}")
            for _rollout in range(per_engine.count(engine)):
                state = rollout(lab, state, seed, index, directory, log, only, skew_share)
                index += 1
    except BaseException:
        print(f"the runs' inventories and reports are kept in {directory}", flush=True)
        raise
    else:
        # They hold the example's registry credentials: nothing of them outlives a soak that held.
        shutil.rmtree(directory, ignore_errors=True)
    finally:
        if own:
            if lab is not None:
                lab.close_connections()
            labctl.down(log=lambda _msg: None)
    return records


def summary(records: list[dict]) -> str:
    table: dict = {}
    for record in records:
        entry = table.setdefault(record["fault"], {"drawn": 0, "struck": 0, "survived": 0})
        entry["drawn"] += 1
        entry["struck"] += record["struck"]["hit"]
        entry["survived"] += record["struck"]["hit"] and not record["breach"]
    lines = ["| fault | drawn | struck | survived |", "|---|---|---|---|"]
    lines += [f"| {name} | {e['drawn']} | {e['struck']} | {e['survived']} |" for name, e in sorted(table.items())]
    skewed = [record for record in records if record.get("clock_skew")]
    if skewed:
        held = sum(not record["breach"] for record in skewed)
        lines.append(f"| clock_skew (beside the fault) | {len(skewed)} | {len(skewed)} | {held} |")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("--rollouts", type=int, default=20)
    parser.add_argument(
        "--seed", default=os.environ.get("SEED") or datetime.datetime.now(datetime.UTC).strftime("%Y%m%d%H%M%S")
    )
    parser.add_argument("--hosts", type=int, default=10)
    parser.add_argument("--controllers", type=int, default=3)
    parser.add_argument("--engines", default="k3s,rke2")
    parser.add_argument("--fault", choices=sorted(FAULTS), help="only this fault (to repeat one)")
    parser.add_argument(
        "--skew-share",
        type=float,
        default=CLOCK_SKEW_SHARE,
        help="the share of rollouts with a host whose clock is off (0 to 1)",
    )
    parser.add_argument("--log", type=Path, default=REPO / ".cache" / "soak" / "soak.jsonl")
    args = parser.parse_args()
    print(
        f"soak: seed {args.seed}, {args.rollouts} rollouts, {args.hosts} hosts ({args.controllers} controllers), "
        f"engines {args.engines}; log {args.log}",
        flush=True,
    )
    started = time.monotonic()
    try:
        records = soak(
            args.seed,
            args.rollouts,
            args.engines.split(","),
            args.hosts,
            args.controllers,
            args.log,
            only=args.fault,
            skew_share=args.skew_share,
        )
    except Breach as exc:
        print(f"BREACH (seed {args.seed}): {exc}\nrepeat: make soak SEED={args.seed}", flush=True)
        return 1
    print(summary(records))
    print(f"soak: {len(records)} rollouts, every invariant held; seed {args.seed}; {time.monotonic() - started:.0f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
