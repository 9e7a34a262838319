"""The payload cache (callback payload_cache, plugin_utils/_payload_cache.py): this collection's module payloads
kept between runs under a key of what they are built from, and nothing else kept or read."""

from __future__ import annotations

import base64
import io
import os
import pickle
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from ansible_collections.cargoship.engine.plugins.plugin_utils import _payload_cache as cache

REPO = Path(__file__).resolve().parents[2]
OURS = "ansible_collections.cargoship.engine.plugins.modules.host_lock-ZIP_DEFLATED-none"
THEIRS = "ansible_collections.community.general.plugins.modules.ini_file-ZIP_DEFLATED-none"
CORE = "ansible.modules.ping-ZIP_DEFLATED-none"


def test_payloads_kept_in_an_older_format_are_not_read(monkeypatch):
    now = cache.key()
    monkeypatch.setattr(cache, "KEPT_FORMAT", "an older release's")
    assert cache.key() != now


def test_the_key_changes_with_a_module_or_a_module_util_and_not_with_anything_else(tmp_path):
    copy = tmp_path / "engine"
    for part in ("plugins/modules", "plugins/module_utils", "roles/lock"):
        shutil.copytree(REPO / part, copy / part)
    first = cache.key(str(copy))
    assert cache.key(str(copy)) == first
    (copy / "roles/lock/tasks/main.yml").write_text("# a role is not in a payload\n")
    assert cache.key(str(copy)) == first
    with open(copy / "plugins/module_utils/_host_lock.py", "a", encoding="utf-8") as handle:
        handle.write("\n# changed\n")
    changed = cache.key(str(copy))
    assert changed != first
    (copy / "plugins/modules/host_lock.py").write_text((copy / "plugins/modules/host_lock.py").read_text() + "\n")
    assert cache.key(str(copy)) not in (first, changed)


def test_only_this_collections_payloads_go_in_and_out_whole(tmp_path):
    run, kept = tmp_path / "run", tmp_path / "kept"
    run.mkdir()
    kept.mkdir()
    for name in (OURS, f"{OURS}.lock", THEIRS, CORE):
        (run / name).write_bytes(b"payload of " + name.encode())
    assert cache.keep(str(run), str(kept)) == 1
    assert sorted(os.listdir(kept)) == [OURS]
    assert (kept / OURS).read_bytes() == b"payload of " + OURS.encode()
    assert (kept / OURS).stat().st_mode & 0o777 == 0o600
    # Kept once: a later run's own build of it does not replace it.
    (run / OURS).write_bytes(b"built again")
    assert cache.keep(str(run), str(kept)) == 0
    fresh = tmp_path / "fresh"
    (kept / THEIRS).write_bytes(b"planted")  # never put into a run, whoever wrote it
    assert cache.seed(str(fresh), str(kept)) == 1
    assert sorted(os.listdir(fresh)) == [OURS]
    # A payload the run already has is left as it is.
    assert cache.seed(str(fresh), str(kept)) == 0


def test_a_cache_directory_that_is_not_the_users_own_closed_one_is_never_used(tmp_path):
    base = tmp_path / "ansiballz"
    directory = cache.kept_directory(str(base))
    assert directory == str(base / cache.key())
    assert (base.stat().st_mode & 0o777, Path(directory).stat().st_mode & 0o777) == (0o700, 0o700)
    # Opened to others by mistake: closed again before anything is read from it.
    os.chmod(directory, 0o777)
    assert cache.kept_directory(str(base)) == directory
    assert Path(directory).stat().st_mode & 0o777 == 0o700
    # A link (to a place someone else may write) is not followed.
    shutil.rmtree(directory)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    os.symlink(elsewhere, directory)
    assert cache.kept_directory(str(base)) is None


PLAYBOOK = """
- name: Take and release a lock on the control host
  hosts: localhost
  gather_facts: false
  tasks:
    - name: Take it
      cargoship.engine.host_lock: {state: acquired, run_id: r, path: "{{ lock }}"}
    - name: Release it
      cargoship.engine.host_lock: {state: released, run_id: r, path: "{{ lock }}"}
"""


def run_playbook(tmp_path: Path) -> str:
    """The run's output with Ansible's debug messages (which say whether it built a payload or found it)."""
    (tmp_path / "play.yml").write_text(PLAYBOOK)
    env = {
        **os.environ,
        "XDG_CACHE_HOME": str(tmp_path / "cache"),
        "ANSIBLE_CONFIG": str(REPO / "ansible.cfg"),
        "ANSIBLE_CALLBACKS_ENABLED": "cargoship.engine.payload_cache",
        "ANSIBLE_DEBUG": "1",
        "ANSIBLE_PYTHON_INTERPRETER": shutil.which("python3") or "python3",
    }
    run = subprocess.run(
        ["ansible-playbook", "-i", "localhost,", "-c", "local", "-e", f"lock={tmp_path / 'lock.json'}", "play.yml"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    return run.stdout + run.stderr


@pytest.mark.skipif(shutil.which("ansible-playbook") is None, reason="needs ansible-playbook on PATH")
def test_a_second_run_uses_the_payload_the_first_built(tmp_path):
    first = run_playbook(tmp_path)
    kept = list((tmp_path / "cache" / "cargoship" / "ansiballz").glob("*/*"))
    assert [p.name for p in kept] == [OURS]
    assert "ANSIBALLZ: Creating module" in first
    second = run_playbook(tmp_path)
    assert "ANSIBALLZ: Creating module" not in second, "the second run built the payload again"
    assert "ANSIBALLZ: using cached module" in second
    # What the second run sent (and the host ran) is the kept payload, with Ansible's module_utils compiled.
    record = pickle.loads(kept[0].read_bytes())
    names = zipfile.ZipFile(io.BytesIO(base64.b64decode(record.zip_data))).namelist()
    assert {"ansible/module_utils/basic.py", "ansible/module_utils/basic.pyc"} <= set(names)
    assert all(f"{name}c" in names for name in names if name.endswith(".py"))


def payload(tmp_path: Path, source: str) -> Path:
    """A payload-like zip of one package with one module, given its bytecode."""
    built = io.BytesIO()
    with zipfile.ZipFile(built, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("pkg/__init__.py", "")
        archive.writestr("pkg/mod.py", source)
    path = tmp_path / "payload.zip"
    path.write_bytes(cache.zip_with_bytecode(built.getvalue()))
    return path


def imported(path: Path) -> tuple[str, str]:
    """Import pkg.mod from the zip in a new Python: its answer and the file name its code was compiled under
    (the bytecode's names the file inside the zip; a source zipimport compiles names the zip too)."""
    code = (
        f"import sys; sys.path.insert(0, {str(path)!r}); import pkg.mod as m; "
        "print(m.answer(), m.answer.__code__.co_filename, sep='\\n')"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    answer, filename = run.stdout.splitlines()
    return answer, filename


def rewrite(path: Path, name: str, change) -> None:
    with zipfile.ZipFile(path) as archive:
        entries = {info.filename: archive.read(info) for info in archive.infolist()}
    entries[name] = change(entries[name])
    with zipfile.ZipFile(path, "w") as archive:
        for entry, data in entries.items():
            archive.writestr(entry, data)


def test_a_payload_is_imported_from_its_bytecode_and_from_its_source_where_the_bytecode_does_not_fit(tmp_path):
    path = payload(tmp_path, "def answer():\n    return 42\n")
    assert imported(path) == ("42", "pkg/mod.py")  # the bytecode, as compiled here
    # Another Python's bytecode (another magic number): passed over for the source.
    rewrite(path, "pkg/mod.pyc", lambda data: bytes([data[0] ^ 0xFF]) + data[1:])
    assert imported(path) == ("42", f"{path}/pkg/mod.py")
    # A source that is not the one compiled (its hash differs): the source wins.
    path = payload(tmp_path, "def answer():\n    return 42\n")
    rewrite(path, "pkg/mod.py", lambda data: data.replace(b"42", b"43"))
    assert imported(path) == ("43", f"{path}/pkg/mod.py")


def test_a_payload_of_an_unknown_shape_is_kept_as_built(tmp_path):
    run, kept = tmp_path / "run", tmp_path / "kept"
    run.mkdir()
    kept.mkdir()
    (run / OURS).write_bytes(pickle.dumps({"zip_data": "not a record of Ansible's"}))
    assert cache.keep(str(run), str(kept)) == 1
    assert (kept / OURS).read_bytes() == (run / OURS).read_bytes()
