"""Benchmark: cargoship's dry run against a ping round and a plain check-mode playbook, on one lab.

    .venv/bin/python tests/bench/dry_run.py --sizes 10,50,100 [--repeat 3] [--controllers 3] [--forks 50] [--real]
    .venv/bin/python tests/bench/dry_run.py --sizes 10 --node-overhead
    .venv/bin/python tests/bench/dry_run.py --sizes 50 --plan            # what a reviewed plan adds
    .venv/bin/python tests/bench/dry_run.py --sizes 10,50 --floor        # also two playbooks of cargoship's shape
    .venv/bin/python tests/bench/dry_run.py --sizes 10,50 --floor --floor-tasks 5   # ... with 5 tasks per host
    .venv/bin/python tests/bench/dry_run.py --sizes 10,50 --mitogen DIR   # DIR holds ansible_mitogen/

Brings the lab up once with as many hosts as the largest size, then for each size (the controllers and
the first workers, by --limit) times: one ``ansible -m ping`` round, ``tests/bench/plain_check.yml``
in check mode (the hand-written peer: the same desired state checked with builtin modules), and
``cargoship engine-config-sync --dry-run``, --repeat times in turn (default 3), and keeps each one's
median. Prints wall times, the ratios the goal is stated in, the tasks per host and the remote module
rounds per host, and the control host's peak memory (RSS of the ansible-playbook processes). Because
the lab's hosts share the control host's cores, it also prints the CPU time each command cost: on the
control host (ansible and its workers and SSH clients) and on the whole machine (the hosts too), and
per added host between sizes, which varies less from run to run than wall time.
With --real, at the largest size: a real run, --repeat real runs of the converged fleet (nothing to do),
and a dry run after them.
With --floor, also two reference playbooks built from cargoship's own tasks: the fleet play and the
connect phase's survey round alone (the remote work of a dry run, nothing else), and the same followed
by as many trivial tasks per host (set_fact) as the dry run has per host in one play: what that number
of tasks costs without cargoship's phase structure (its plays, its phase includes, its reports).
--floor-tasks N sets that number instead, to see what a dry run of N tasks per host would cost. The
third, survey+phases, has the shape a dry run had before it assessed each play once (issue 28): its plays,
a role per phase included per host from a loop, as many tasks per host in each phase as it had, with
trivial tasks in place of cargoship's work; it shows what that per-host structure cost.
With --plan, at the largest size: dry runs without a plan, writing one, and checking every host against
it (a dry run given the plan, as applying one checks before it changes anything).
With --node-overhead, a real run of the smallest size one node at a time (work concurrency 1) instead,
and per node: its time in the sync, the part spent on the engine's own restart (stop, start with its
settle time, until Ready) and on the drain, and the rest, cargoship's own overhead.
Timing is measured here, never asserted in tests.
"""

from __future__ import annotations

import argparse
import datetime
import os
import resource
import shutil
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests" / "lab"))

import ansible_runner  # noqa: E402
import labctl  # noqa: E402
import yaml  # noqa: E402

from cargoship_runner.collection import _plugin_utils, run_collections_path  # noqa: E402
from cargoship_runner.runner import RunOptions, ansible_cfg, run_playbook, ssh_args  # noqa: E402

# The same connection settings as the command's runs, so that only the work differs.
PEER_ENV = {
    "ANSIBLE_HOST_KEY_CHECKING": "True",
    "ANSIBLE_PIPELINING": "True",
    "ANSIBLE_SSH_ARGS": ssh_args(ansible_cfg()),
    "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
}

# Tasks that run on the control host alone: no round trip to the managed host.
CONTROLLER_ONLY = {
    "ansible.builtin.set_fact",
    "ansible.builtin.assert",
    "ansible.builtin.debug",
    "ansible.builtin.fail",
    "ansible.builtin.include_role",
    "ansible.builtin.validate_argument_spec",
    "ansible.builtin.group_by",
    "ansible.builtin.include_tasks",
    "cargoship.engine.phase_report",
    "cargoship.engine.validate_input",
    "cargoship.engine.fleet",
    "cargoship.engine.validate_hosts",
    "cargoship.engine.lock_heartbeat",
}


class Counts:
    """Tasks per host (each one a worker process on the control host; meta tasks are not), and those of
    them that went to the host (module rounds)."""

    def __init__(self) -> None:
        self.tasks: Counter = Counter()
        self.remote: Counter = Counter()

    def __call__(self, event: dict) -> bool:
        if event.get("event") not in ("runner_on_ok", "runner_on_failed", "runner_on_skipped"):
            return True
        data = event.get("event_data") or {}
        host = data.get("host")
        if data.get("resolved_action") == "ansible.builtin.meta":
            return True  # run by Ansible in its own process: no worker, no round, not a task here
        self.tasks[host] += 1
        if event["event"] == "runner_on_skipped" or data.get("resolved_action") in CONTROLLER_ONLY:
            return True
        if (data.get("res") or {}).get("answered_by") == "host_survey":
            return True  # given on the control host from the survey round
        delegated = ((data.get("res") or {}).get("_ansible_delegated_vars") or {}).get("ansible_host")
        if delegated not in ("localhost", "127.0.0.1"):
            self.remote[host] += 1
        return True

    def median(self, counter: Counter) -> int:
        values = sorted(counter.values())
        return values[len(values) // 2] if values else 0


# A node's own sync steps whose time is the engine's (its restart, until Ready) or the drain's.
ENGINE_AND_DRAIN = {
    "Drain the node",
    "Stop the engine",
    "Start the engine",
    "Wait until the node is Ready",
    "Prove the engine runs the new configuration, then stamp and uncordon the node",
}


class NodeTimes:
    """Per host, in the plays that sync nodes: the span of its tasks, and the engine's and drain's part."""

    def __init__(self) -> None:
        self.started: dict = {}
        self.span: dict = {}
        self.engine: Counter = Counter()

    def __call__(self, event: dict) -> bool:
        data = event.get("event_data") or {}
        host, play = data.get("host"), data.get("play") or ""
        if not host or not play.startswith("Sync"):
            return True
        when = datetime.datetime.fromisoformat(event["created"]).timestamp()
        if event["event"] == "runner_on_start":
            self.started[(host, data.get("task_uuid"))] = when
            first, last = self.span.get(host, (when, when))
            self.span[host] = (min(first, when), max(last, when))
        elif event["event"] in ("runner_on_ok", "runner_on_failed", "runner_on_skipped"):
            began = self.started.pop((host, data.get("task_uuid")), when)
            first, last = self.span.get(host, (began, when))
            self.span[host] = (min(first, began), max(last, when))
            if data.get("task") in ENGINE_AND_DRAIN:
                self.engine[host] += when - began
        return True


def node_overhead(inventory: Path, limit: str, forks: int) -> None:
    times = NodeTimes()
    outcome = run_playbook(
        RunOptions(
            playbook="engine_config_sync",
            inventory=inventory,
            limit=limit,
            forks=forks,
            extravars={"cargoship_work_concurrency": 1},
        ),
        times,
    )
    print(f"real run, one node at a time: rc {outcome.rc}")
    print(f"{'node':>6} {'in sync':>8} {'restart+drain':>14} {'overhead':>9}")
    overheads = []
    for host, (first, last) in sorted(times.span.items()):
        spent = last - first
        overheads.append(spent - times.engine[host])
        print(f"{host:>6} {spent:>7.1f}s {times.engine[host]:>13.1f}s {overheads[-1]:>8.1f}s")
    overheads.sort()
    print(f"overhead per node: median {overheads[len(overheads) // 2]:.1f}s, max {overheads[-1]:.1f}s")


def limit_of(lab, size: int) -> str:
    names = lab_names(lab)
    return ",".join(names["controllers"] + names["workers"][: max(size - len(names["controllers"]), 0)])


def lab_names(lab) -> dict:
    return {
        "controllers": [h.name for h in lab.hosts if h.role == "server"],
        "workers": [h.name for h in lab.hosts if h.role == "agent"],
    }


def machine_busy_seconds() -> float:
    """CPU time the whole machine has spent busy (all cores, every process: the lab's hosts too)."""
    with open("/proc/stat", encoding="ascii") as stat:
        fields = [int(value) for value in stat.readline().split()[1:]]
    idle = fields[3] + fields[4]  # idle, iowait
    return (sum(fields) - idle) / os.sysconf("SC_CLK_TCK")


def children_cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def measured(run, *args, **kwargs) -> dict:
    """The command's result with the control host's CPU time (the processes it waited for) and the whole
    machine's busy time while it ran."""
    cpu, busy = children_cpu_seconds(), machine_busy_seconds()
    result = run(*args, **kwargs)
    result["cpu"] = children_cpu_seconds() - cpu
    result["busy"] = machine_busy_seconds() - busy
    return result


def median_of(runs: list) -> dict:
    """Per measure, the median of the runs (the counts are the same in every run: the first one's)."""

    def middle(key):
        values = sorted(run[key] for run in runs)
        return values[len(values) // 2]

    return {
        **runs[0],
        "rc": max(run["rc"] for run in runs),
        "seconds": middle("seconds"),
        "cpu": middle("cpu"),
        "busy": middle("busy"),
    }


def print_per_added_host(before: dict, now: dict, label: str = "cargoship") -> None:
    """What each host added between two sizes cost, for ping and ``label`` (cargoship or a floor playbook):
    wall time, the whole machine's CPU time and the control host's."""
    added = now["size"] - before["size"]

    def each(key: str) -> tuple:
        ping = (now["ping"][key] - before["ping"][key]) / added
        theirs = (now[label][key] - before[label][key]) / added
        return ping, theirs, theirs / ping if ping > 0 else float("nan")

    wall, busy, cpu = each("seconds"), each("busy"), each("cpu")
    print(
        f"      per added host, {label}: wall {wall[1]:.2f}s against ping's {wall[0]:.2f}s ({wall[2]:.1f} x);"
        f" machine CPU {busy[1]:.2f}s against {busy[0]:.2f}s ({busy[2]:.1f} x);"
        f" control-host CPU {cpu[1]:.2f}s against {cpu[0]:.2f}s"
    )


def timed_ping(inventory: Path, limit: str, forks: int) -> dict:
    counts = Counts()
    started = time.monotonic()
    runner = ansible_runner.run(
        private_data_dir=tempfile.mkdtemp(prefix="cargoship-bench-"),
        host_pattern="all",
        module="ansible.builtin.ping",
        inventory=str(inventory),
        limit=limit,
        forks=forks,
        quiet=True,
        event_handler=counts,
        envvars=PEER_ENV,
    )
    return {"rc": runner.rc, "seconds": time.monotonic() - started, "counts": counts}


def timed_check(playbook: Path, inventory: Path, limit: str, forks: int, env: dict | None = None) -> dict:
    """A playbook in check mode with diffs, run as the peer is: the plain playbook, or a floor playbook."""
    counts = Counts()
    started = time.monotonic()
    runner = ansible_runner.run(
        private_data_dir=tempfile.mkdtemp(prefix="cargoship-bench-"),
        playbook=str(playbook),
        inventory=str(inventory),
        limit=limit,
        forks=forks,
        cmdline="--check --diff",
        quiet=True,
        event_handler=counts,
        envvars={**PEER_ENV, **(env or {})},
    )
    return {"rc": runner.rc, "seconds": time.monotonic() - started, "counts": counts}


def timed_plain(inventory: Path, limit: str, forks: int) -> dict:
    return timed_check(REPO / "tests" / "bench" / "plain_check.yml", inventory, limit, forks)


def floor_playbooks(directory: Path, tasks_per_host: int) -> dict:
    """The reference playbooks of --floor, built from the connect role's own tasks (so they stay in step)."""
    tasks = yaml.safe_load((REPO / "roles" / "connect" / "tasks" / "main.yml").read_text())
    own = [t for t in tasks if t.get("name") == "Name this run" or "cargoship.engine.host_survey" in t]
    play = {"name": "Survey", "hosts": "cargoship_controllers:cargoship_workers", "gather_facts": False, "tasks": own}
    trivial = [
        {"name": f"Trivial task {n}", "ansible.builtin.set_fact": {f"bench_floor_{n}": n}}
        for n in range(tasks_per_host - 1)
    ]
    fleet = {"ansible.builtin.import_playbook": "cargoship.engine.fleet"}
    books = {
        "survey": [fleet, play],
        "survey+tasks": [fleet, {**play, "tasks": own + trivial}],
        "survey+phases": [fleet, *phase_shaped_plays(directory, own)],
    }
    paths = {}
    for name, book in books.items():
        paths[name] = directory / f"floor-{name.replace('+', '-')}.yml"
        paths[name].write_text(yaml.safe_dump(book, sort_keys=False))
    return paths


# What each phase role runs per host in a dry run, where that is not one task: the survey stands for
# connect's own tasks, a sync phase compares and reports, and some phases have one task for the whole
# play (run_once) instead of one per host.
TRIVIAL_TASKS = {"connect": 0, "sync_controller": 2, "sync_worker": 2}
RUN_ONCE = {"validate_hosts", "kubeconfig", "label_nodes"}


def phase_shaped_plays(directory: Path, survey: list) -> list:
    """Plays of the dry run's shape with trivial tasks: what its plays, roles and includes cost per host
    without cargoship's work in them (the answers from the survey, the comparisons, the Kubernetes calls).
    The plays and their hosts are the playbook's, the phases of each play those the dry-run gate includes."""
    phases_module = _plugin_utils().phases
    declared = phases_module.load_phases(operation="engine-config-sync")
    playbook = yaml.safe_load((REPO / "playbooks" / "engine_config_sync.yml").read_text())
    # The plays that run phases (the validation play before them contacts no host).
    hosts = [play["hosts"] for play in playbook if "hosts" in play and "phase_steps" in str(play)]
    plays = []
    for play, play_hosts in zip(phases_module.PLAYS, hosts, strict=True):
        names = [step["role"] for step in phases_module.play_steps(declared, play, None, {}, True)]
        for name in names:
            tasks = directory / "roles" / f"floor_{name}" / "tasks"
            tasks.mkdir(parents=True, exist_ok=True)
            trivial = [
                {
                    "name": f"Trivial task {n} of {name}",
                    "ansible.builtin.set_fact": {f"floor_{name}_{n}": n},
                    **({"run_once": True} if name in RUN_ONCE else {}),
                }
                for n in range(TRIVIAL_TASKS.get(name, 1))
            ]
            (tasks / "main.yml").write_text(yaml.safe_dump(survey if name == "connect" else trivial, sort_keys=False))
        include = {
            "name": f"Run the {play} phases",
            "ansible.builtin.include_role": {"name": "floor_{{ floor_phase }}"},
            "loop": names,
            "loop_control": {"loop_var": "floor_phase"},
        }
        plays.append({"name": play, "hosts": play_hosts, "gather_facts": False, "tasks": [include]})
    return plays


def timed_floor(playbook: Path, inventory: Path, limit: str, forks: int) -> dict:
    # The floor playbooks import cargoship's fleet play: the collection has to be found.
    return timed_check(
        playbook, inventory, limit, forks, {"ANSIBLE_COLLECTIONS_PATH": run_collections_path(ansible_cfg())}
    )


def timed_cargoship(inventory: Path, limit: str, forks: int, dry_run: bool = True, more: dict | None = None) -> dict:
    counts = Counts()
    extravars = {"cargoship_work_concurrency": "20%", **(more or {})}
    started = time.monotonic()
    options = RunOptions(
        playbook="engine_config_sync",
        inventory=inventory,
        dry_run=dry_run,
        limit=limit,
        forks=forks,
        extravars=extravars,
    )
    outcome = run_playbook(options, counts)
    errors = [e.get("message") for e in (outcome.report or {}).get("errors") or []] + list(outcome.ansible_errors or [])
    return {"rc": outcome.rc, "seconds": time.monotonic() - started, "counts": counts, "errors": errors}


def plan_costs(inventory: Path, limit: str, forks: int, repeat: int, size: int) -> None:
    """What a reviewed plan adds to a dry run: writing it (one node list, the inventory's salted digest), and
    a dry run that checks every host against it (what applying one does before it changes anything)."""
    plan = Path(tempfile.mkdtemp(prefix="cargoship-bench-")) / "fleet.plan"
    plain = [timed_cargoship(inventory, limit, forks)["seconds"] for _run in range(repeat)]
    written = [
        timed_cargoship(inventory, limit, forks, more={"cargoship_plan_out": str(plan)}) for _run in range(repeat)
    ]
    checked = [
        timed_cargoship(inventory, limit, forks, more={"cargoship_plan_file": str(plan)}) for _run in range(repeat)
    ]

    def middle(values: list) -> float:
        return sorted(values)[len(values) // 2]

    for run in written + checked:
        if run["rc"] != 0:
            print(f"a plan run failed (rc {run['rc']}): {run['errors'][-3:]}")
    if not plan.exists():
        print("no plan was written")
        return

    print(
        f"plan at {size} hosts: dry run {middle(plain):.1f}s; writing the plan {middle([r['seconds'] for r in written]):.1f}s "
        f"(rc {'/'.join(str(r['rc']) for r in written)}); checking every host against it "
        f"{middle([r['seconds'] for r in checked]):.1f}s (rc {'/'.join(str(r['rc']) for r in checked)}); "
        f"plan file {plan.stat().st_size / 1024:.0f} KiB"
    )


def children_peak_mb() -> float:
    """The largest resident set of any process this one waited for (ansible-playbook and its forks)."""
    return resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("--sizes", default="10,50,100", help="host counts, comma-separated")
    parser.add_argument("--controllers", type=int, default=3)
    parser.add_argument("--forks", type=int, default=50)
    parser.add_argument("--repeat", type=int, default=3, help="runs of each command per size; medians are kept")
    parser.add_argument(
        "--floor", action="store_true", help="also time three playbooks of cargoship's survey, task count and shape"
    )
    parser.add_argument(
        "--floor-tasks",
        type=int,
        metavar="N",
        help="with --floor, N tasks per host (the survey among them) instead of as many as the dry run has",
    )
    parser.add_argument(
        "--real",
        action="store_true",
        help="also a real run, real runs with nothing to do, and a dry run, at the largest size",
    )
    parser.add_argument(
        "--plan",
        action="store_true",
        help="also, at the largest size, a dry run writing a plan and a dry run checking the fleet against it",
    )
    parser.add_argument(
        "--node-overhead",
        action="store_true",
        help="a real run of the smallest size, one node at a time, timed per node",
    )
    parser.add_argument(
        "--mitogen",
        metavar="DIR",
        help="run everything (ping, the peer, cargoship) with mitogen's linear strategy from DIR (an unpacked mitogen wheel)",
    )
    args = parser.parse_args()
    if args.mitogen:
        # An option to measure, never cargoship's default: the same strategy for all three, so only the work differs.
        strategies = Path(args.mitogen).resolve() / "ansible_mitogen" / "plugins" / "strategy"
        if not strategies.is_dir():
            parser.error(f"--mitogen: no {strategies}")
        os.environ["ANSIBLE_STRATEGY_PLUGINS"] = str(strategies)
        os.environ["ANSIBLE_STRATEGY"] = "mitogen_linear"
        os.environ["PYTHONPATH"] = os.pathsep.join(
            filter(None, [str(Path(args.mitogen).resolve()), os.environ.get("PYTHONPATH")])
        )
    sizes = sorted(int(s) for s in args.sizes.split(","))
    up_started = time.monotonic()
    lab = labctl.up(sizes[-1], args.controllers, "k3s")
    try:
        up_seconds = time.monotonic() - up_started
        (lab.state / "group_vars").mkdir(exist_ok=True)
        shutil.copy(REPO / "examples" / "group_vars" / "all.yml", lab.state / "group_vars" / "all.yml")
        inventory = lab.state / "inventory.yml"
        print(
            f"lab of {sizes[-1]} hosts ({args.controllers} controllers) up in {up_seconds:.1f}s; forks {args.forks};"
            f" medians of {args.repeat} runs" + ("; strategy mitogen_linear" if args.mitogen else "")
        )
        print(
            f"{'hosts':>5} {'ping':>7} {'plain':>7} {'cargoship':>9} {'÷plain':>7} {'÷ping':>6}"
            f" {'tasks/host plain|cargoship':>27} {'remote rounds/host plain|cargoship':>35}"
        )
        if args.node_overhead:
            node_overhead(inventory, limit_of(lab, sizes[0]), args.forks)
            return 0
        floors: dict = {}
        previous = None
        for size in sizes:
            limit = limit_of(lab, size)
            runs: dict = {"ping": [], "plain": [], "cargoship": []}
            for _round in range(args.repeat):
                runs["ping"].append(measured(timed_ping, inventory, limit, args.forks))
                runs["plain"].append(measured(timed_plain, inventory, limit, args.forks))
                runs["cargoship"].append(measured(timed_cargoship, inventory, limit, args.forks))
                if args.floor and not floors:
                    # As many tasks per host as the dry run just had (the survey among them).
                    counts = runs["cargoship"][0]["counts"]
                    floors = floor_playbooks(
                        Path(tempfile.mkdtemp(prefix="cargoship-bench-")),
                        args.floor_tasks or counts.median(counts.tasks),
                    )
                for name, playbook in floors.items():
                    runs.setdefault(name, [])
                    runs[name].append(measured(timed_floor, playbook, inventory, limit, args.forks))
            ping, plain, ours = (median_of(runs[name]) for name in ("ping", "plain", "cargoship"))
            print(
                f"{size:>5} {ping['seconds']:>6.1f}s {plain['seconds']:>6.1f}s {ours['seconds']:>8.1f}s"
                f" {ours['seconds'] / plain['seconds']:>7.2f} {ours['seconds'] / ping['seconds']:>6.2f}"
                f" {plain['counts'].median(plain['counts'].tasks):>13}|{ours['counts'].median(ours['counts'].tasks):<13}"
                f" {plain['counts'].median(plain['counts'].remote):>17}|{ours['counts'].median(ours['counts'].remote):<17}"
                f" rc {ping['rc']}/{plain['rc']}/{ours['rc']}"
            )
            print(
                "      wall of each run: "
                + "; ".join(f"{name} " + " ".join(f"{run['seconds']:.1f}" for run in runs[name]) for name in runs)
            )
            print(
                "      CPU, control host | whole machine:"
                f" ping {ping['cpu']:.1f}s | {ping['busy']:.1f}s,"
                f" plain {plain['cpu']:.1f}s | {plain['busy']:.1f}s,"
                f" cargoship {ours['cpu']:.1f}s | {ours['busy']:.1f}s"
            )
            floor = {name: median_of(runs[name]) for name in floors}
            for name, measure in floor.items():
                print(
                    f"      {name}: {measure['seconds']:.1f}s ({measure['seconds'] / ping['seconds']:.2f} x ping),"
                    f" {measure['counts'].median(measure['counts'].tasks)} tasks/host, rc {measure['rc']}"
                )
            now = {"size": size, "ping": ping, "cargoship": ours, **floor}
            if previous:
                for name in ("cargoship", *floor):
                    print_per_added_host(previous, now, label=name)
            previous = now
        if args.plan:
            plan_costs(inventory, limit_of(lab, sizes[-1]), args.forks, args.repeat, sizes[-1])
        if args.real:
            limit = limit_of(lab, sizes[-1])
            real = timed_cargoship(inventory, limit, args.forks, dry_run=False)
            # The converged fleet again: what a real run costs when there is nothing to do.
            idle = [timed_cargoship(inventory, limit, args.forks, dry_run=False) for _run in range(args.repeat)]
            after = timed_cargoship(inventory, limit, args.forks)
            idle_seconds = sorted(run["seconds"] for run in idle)
            print(
                f"real run at {sizes[-1]} hosts: {real['seconds']:.1f}s rc {real['rc']}; "
                f"real run with nothing to do: median {idle_seconds[len(idle_seconds) // 2]:.1f}s "
                f"({' '.join(f'{x:.1f}' for x in idle_seconds)}; rc {'/'.join(str(run['rc']) for run in idle)}); "
                f"dry run after: {after['seconds']:.1f}s"
            )
        print(f"peak RSS of a child process (ansible-playbook and its workers): {children_peak_mb():.0f} MB")
    finally:
        labctl.down(log=lambda _msg: None)
    return 0


if __name__ == "__main__":
    sys.exit(main())
