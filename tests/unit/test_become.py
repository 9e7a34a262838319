"""`become` only where a task needs root: a static check of every task the collection ships."""

from __future__ import annotations

from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
# The modules that need root on the host, and why.
NEEDS_ROOT = {
    "cargoship.engine.engine_config": "reads and writes the engine's root-only files and backups",
    "cargoship.engine.host_lock": "the lock lives in /var/lib/cargoship",
    "cargoship.engine.host_info": "reads the firewall's rules",
    "cargoship.engine.engine_service": "stops and starts the engine",
    "cargoship.engine.engine_info": "reads the engine's root-only config files (node name, paths)",
    "ansible.builtin.slurp": "reads the engine's root-only admin kubeconfig",
    "cargoship.engine.host_survey": "answers the calls of the modules above in one round",
    "cargoship.engine.engine_proof": "reads what the engine generated in its root-only data-dir (engine_evidence)",
}
KEYWORDS = {"name", "become", "when", "register", "vars", "tags", "block", "rescue", "always", "loop", "loop_control"}


def tasks_of(items):
    for task in items or []:
        yield task
        for section in ("block", "rescue", "always"):
            yield from tasks_of(task.get(section))


def module_of(task: dict) -> str:
    return next(key for key in task if "." in key and key not in KEYWORDS)


def test_become_is_set_only_on_tasks_whose_module_needs_root():
    files = sorted(REPO.glob("roles/*/tasks/*.yml")) + sorted(REPO.glob("playbooks/*.yml"))
    checked = 0
    for path in files:
        document = yaml.safe_load(path.read_text()) or []
        plays = document if path.parent.name == "playbooks" else [{"tasks": document}]
        for play in plays:
            assert "become" not in play, f"{path}: become on a whole play"
            for task in tasks_of(play.get("tasks")):
                if "become" not in task or "block" in task:
                    continue
                checked += 1
                if path.name == "run_one.yml":
                    assert task["become"] == "{{ hooks_item.become | default(false) }}", "a hook's become is its own"
                    continue
                if module_of(task) == "cargoship.engine.phase_read":
                    continue  # held to its phase's declared read below
                assert module_of(task) in NEEDS_ROOT, f"{path}: {task.get('name')} uses become without needing root"
    assert checked >= 12


def test_a_phase_reads_with_become_exactly_where_its_declared_read_needs_root():
    from ansible_collections.cargoship.engine.plugins.plugin_utils._phases import load_phases

    reads = {p["name"]: p["read"] for p in load_phases() if p.get("read")}

    def needs_root(read: dict) -> bool:
        # host_info needs root for the firewall only.
        return read["module"] != "host_info" or "firewall" in read["args"].get("gather", [])

    # The survey asks every declared read with its declaration's become (a dry run's play assessment takes the
    # answers as they are): each declaration says become exactly where its module reads root-only things.
    for name, read in reads.items():
        assert bool(read.get("become")) == needs_root(read), f"{name}: its read's become"
    seen = set()
    for path in sorted(REPO.glob("roles/*/tasks/*.yml")):
        for task in tasks_of(yaml.safe_load(path.read_text()) or []):
            if "block" in task or module_of(task) != "cargoship.engine.phase_read":
                continue
            phase = task["cargoship.engine.phase_read"]["phase"]
            names = [phase] if "{{" not in phase else ["sync_controller", "sync_worker"]
            for name in names:
                seen.add(name)
                assert bool(task.get("become")) == needs_root(reads[name]), f"{path}: {task.get('name')}"
    assert seen, "no phase_read task found"
