"""The engine files backend, on a directory of its own: staged writes, backups, restore, clean-up."""

from __future__ import annotations

import json
import os
import stat

import pytest

from ansible_collections.cargoship.engine.plugins.module_utils._engine_files import (
    TEMP_PREFIX,
    EngineFiles,
    FileError,
    mover_of,
)


@pytest.fixture
def host(tmp_path):
    etc = tmp_path / "etc" / "rancher" / "k3s"
    etc.mkdir(parents=True)
    (etc / "registries.yaml").write_text("old registries\n")
    return tmp_path


def backend(host, run="run1", **kwargs) -> EngineFiles:
    return EngineFiles(str(host / "backups" / run), run, owner=None, **kwargs)


def item(path, content):
    return {"path": str(path), "content": content}


def test_staged_files_wait_beside_their_destination_and_a_write_renames_them_in(host):
    registries = host / "etc/rancher/k3s/registries.yaml"
    dropin = host / "etc/rancher/k3s/config.yaml.d/90-cargoship.yaml"
    files = backend(host)
    drifted = [item(registries, "new registries\n"), item(dropin, "a: 1\n")]
    changes = [{}, {}]
    files.stage(drifted, changes)
    assert registries.read_text() == "old registries\n", "staging changes nothing the engine reads"
    staged = changes[0]["staged"]
    assert os.path.dirname(staged) == str(registries.parent) and staged.endswith(".new")
    assert stat.S_IMODE(os.stat(staged).st_mode) == 0o600
    inode = os.stat(staged).st_ino
    files.write(drifted)
    assert registries.read_text() == "new registries\n" and dropin.read_text() == "a: 1\n"
    assert os.stat(registries).st_ino == inode, "the staged file was renamed in, not written again"
    assert not any(name.startswith(TEMP_PREFIX) for name in os.listdir(registries.parent))


def test_a_failed_stage_leaves_nothing_behind_and_says_nothing_changed(host, monkeypatch):
    registries = host / "etc/rancher/k3s/registries.yaml"
    audit = host / "var/lib/rancher/k3s/server/cargoship-audit-policy.yaml"
    files = backend(host)
    real = files.write_whole

    def full_disk(directory, content, name=None):
        if "audit" in (name or ""):
            raise OSError(28, "No space left on device")
        return real(directory, content, name)

    monkeypatch.setattr(files, "write_whole", full_disk)
    with pytest.raises(FileError) as failure:
        files.stage([item(registries, "new\n"), item(audit, "policy\n")], [{}, {}])
    assert "No space left on device" in failure.value.msg and "Nothing was changed" in failure.value.msg
    assert failure.value.path == str(audit)
    assert registries.read_text() == "old registries\n"
    assert [n for n in os.listdir(registries.parent) if n.startswith(TEMP_PREFIX)] == []


def test_restore_puts_back_the_files_as_before_the_run_and_removes_the_ones_it_created(host):
    registries = host / "etc/rancher/k3s/registries.yaml"
    created = host / "etc/rancher/k3s/config.yaml.d/90-cargoship.yaml"
    files = backend(host)
    files.write([item(registries, "first\n"), item(created, "x: 1\n")])
    files.write([item(registries, "second\n")])  # the backup keeps the file as it was before the run
    result = files.restore()
    assert registries.read_text() == "old registries\n"
    assert not created.exists()
    assert result["backup_found"] and result["restart_required"]
    assert {c["action"] for c in result["changes"]} == {"restore", "remove"}
    index = json.loads((host / "backups/run1/index.json").read_text())
    assert index[str(created)] is None


def test_restore_without_a_backup_says_nothing_was_written(host):
    result = backend(host, run="never").restore()
    assert result["backup_found"] is False and result["changed"] is False


def test_check_mode_restore_reports_and_touches_nothing(host):
    registries = host / "etc/rancher/k3s/registries.yaml"
    backend(host).write([item(registries, "new\n")])
    result = backend(host, check_mode=True).restore()
    assert result["changed"] and registries.read_text() == "new\n"


def test_a_symbolic_link_at_a_destination_is_refused(host, tmp_path):
    target = tmp_path / "elsewhere"
    target.write_text("not the engine's\n")
    link = host / "etc/rancher/k3s/registries.yaml"
    link.unlink()
    link.symlink_to(target)
    with pytest.raises(FileError, match="symbolic link"):
        backend(host).stage([item(link, "new\n")], [{}])
    assert target.read_text() == "not the engine's\n"


def test_clean_removes_leftover_temporary_files_only_where_cargoship_writes(host):
    own = host / "var/lib/rancher/k3s/server/deep"
    own.mkdir(parents=True)
    (own / f"{TEMP_PREFIX}abc").write_text("half")
    etc = host / "etc/rancher/k3s"
    (etc / f"{TEMP_PREFIX}def").write_text("half")
    (etc / "sub").mkdir()
    (etc / "sub" / f"{TEMP_PREFIX}ghi").write_text("not ours to look into")
    changes = backend(host).clean([str(host / "var/lib/rancher/k3s/server")], [str(etc)])
    assert sorted(os.path.basename(c["path"]) for c in changes) == [f"{TEMP_PREFIX}abc", f"{TEMP_PREFIX}def"]
    assert (etc / "sub" / f"{TEMP_PREFIX}ghi").exists() and not (etc / f"{TEMP_PREFIX}def").exists()


@pytest.mark.skipif(os.geteuid() != 0, reason="changing a file's owner needs root, as the module runs")
@pytest.mark.parametrize("staged_first", [True, False])
def test_a_file_owned_by_another_user_and_readable_by_all_is_replaced_by_roots_0600_file(host, staged_first):
    registries = host / "etc/rancher/k3s/registries.yaml"
    os.chown(registries, 1000, 1000)
    registries.chmod(0o644)
    seen = []

    class Module:
        """What mover_of uses of an AnsibleModule; SELinux is off here."""

        @staticmethod
        def selinux_enabled() -> bool:
            return False

    move = mover_of(Module())

    def watched(source: str, destination: str) -> None:
        # The new file as it is the moment before it takes the old one's place.
        seen.append(os.stat(source))
        move(source, destination)

    files = EngineFiles(str(host / "backups" / "run1"), "run1", move=watched, owner=(0, 0))
    drifted = [item(registries, "configs: {r: {auth: {password: new}}}\n")]
    if staged_first:
        files.stage(drifted, [{}])
    files.write(drifted)
    now = registries.stat()
    assert (now.st_uid, now.st_gid, stat.S_IMODE(now.st_mode)) == (0, 0, 0o600)
    assert [(s.st_uid, stat.S_IMODE(s.st_mode)) for s in seen] == [(0, 0o600)], "never readable by others"
    assert registries.read_text().endswith("password: new}}}\n")
