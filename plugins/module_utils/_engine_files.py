# Copyright: cargoship developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The engine's files on a host, changed so that nothing is ever half there, and put back on demand.

- ``stage``: back up the current files, then write each new one whole beside its destination while the
  engine runs (a full disk fails here, with nothing the engine reads changed);
- ``write``: put the new files in place, by renaming what was staged, else by writing them now;
- ``restore``: the backed-up files back (files that did not exist removed);
- ``clean``: temporary files an interrupted write left.

Files are written root-owned, 0600, flushed to disk, and renamed into place in their own directory.
A symbolic link at a destination is refused: something else put it there. Errors are ``FileError``,
carrying a message for the operator and the path concerned; the module turns them into its failure.
Runs on the managed hosts: Python 3.8 compatible.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile

TEMP_PREFIX = ".cargoship-"


class FileError(Exception):
    def __init__(self, msg: str, path: str | None = None):
        super().__init__(msg)
        self.msg, self.path = msg, path


def sync_directory(directory: str) -> None:
    """Flush a directory's entries to disk, so that a rename in it survives a power loss."""
    fd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _move(source: str, destination: str) -> None:
    """Rename a file over another one: the new file keeps the owner and mode it was created with (never
    those of the file it replaces), and the directory entry is flushed."""
    os.replace(source, destination)
    sync_directory(os.path.dirname(destination) or ".")


def mover_of(module):
    """_move, keeping the SELinux context that the replaced file had (or the directory's default), as the
    engines' policies expect; unlike AnsibleModule.atomic_move, which also hands the new file the old
    one's owner and mode, so that a credential file once readable by another user would stay so."""

    def move(source: str, destination: str) -> None:
        if module.selinux_enabled():
            if os.path.exists(destination):
                context = module.selinux_context(destination)
            else:
                context = module.selinux_default_context(destination)
            module.set_context_if_different(source, context, False)
        _move(source, destination)

    return move


class EngineFiles:
    """Writes, backs up and restores files under one backup directory (one per run)."""

    def __init__(self, backup_dir: str, backup_id: str, check_mode: bool = False, move=_move, owner=(0, 0)):
        self.backup_dir, self.backup_id, self.check_mode = backup_dir, backup_id, check_mode
        # The module passes mover_of(module), which keeps a destination's SELinux context.
        self.move, self.owner = move, owner

    # -- reading ------------------------------------------------------------------------------------
    @staticmethod
    def read(path: str) -> str | None:
        """The file's content, None if there is none."""
        if os.path.islink(path):
            raise FileError(f"refusing to manage {path}: it is a symbolic link (something else put it there)", path)
        try:
            with open(path, encoding="utf-8") as handle:
                return handle.read()
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise FileError(f"cannot read {path}: {exc}", path) from exc

    # -- writing ------------------------------------------------------------------------------------
    def staged_path(self, path: str) -> str:
        """Where a staged new content of path waits: beside it, so that putting it in place is a rename.
        The name ends in .new so that no engine pattern (config.yaml.d/*.yaml matches hidden files) reads it."""
        return os.path.join(os.path.dirname(path), f"{TEMP_PREFIX}staged-{self.backup_id}-{os.path.basename(path)}.new")

    def write_whole(self, directory: str, content: str, name: str | None = None) -> str:
        """Write content to a new 0600 file in directory, flushed to disk; return its path. A partly
        written file is removed before the error goes up (OSError)."""
        if os.path.islink(directory):
            raise FileError(f"refusing to write into {directory}: it is a symbolic link", directory)
        os.makedirs(directory, mode=0o700, exist_ok=True)
        if name is None:
            fd, tmp = tempfile.mkstemp(prefix=TEMP_PREFIX, dir=directory)
        else:
            tmp = os.path.join(directory, name)
            if os.path.lexists(tmp):
                os.unlink(tmp)
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                # Root's and 0600 before a byte is written (mkstemp creates it 0600 already).
                os.fchmod(handle.fileno(), 0o600)
                if self.owner is not None:
                    os.fchown(handle.fileno(), *self.owner)
                handle.write(content)
                handle.flush()
                os.fsync(handle.fileno())
        except OSError:
            os.unlink(tmp)
            raise
        return tmp

    def put_in_place(self, ready: str, path: str) -> None:
        """Rename a whole file over path (the same directory, so nothing is ever half there). It has the
        owner and mode write_whole gave it from its creation."""
        self.move(ready, path)

    def write_atomically(self, path: str, content: str) -> None:
        try:
            self.put_in_place(self.write_whole(os.path.dirname(path), content), path)
        except OSError as exc:
            raise FileError(f"could not write {path}: {exc}; the previous file is unchanged", path) from exc

    def take_staged(self, path: str, content: str) -> str | None:
        """The staged file for path if it holds exactly content, else None (and a stale one is removed)."""
        staged = self.staged_path(path)
        if not os.path.isfile(staged) or os.path.islink(staged):
            return None
        with open(staged, encoding="utf-8") as handle:
            if handle.read() == content:
                return staged
        os.unlink(staged)
        return None

    def remove_staged(self, paths: list[str]) -> None:
        for path in paths:
            staged = self.staged_path(path)
            if os.path.lexists(staged):
                os.unlink(staged)

    # -- backups ------------------------------------------------------------------------------------
    def take_backup(self, files: list[dict]) -> None:
        """Record every file about to be written; a file that did not exist is recorded as absent. The
        first record of a path in a run stays: it is the file as it was before the run."""
        os.makedirs(self.backup_dir, mode=0o700, exist_ok=True)
        index_path = os.path.join(self.backup_dir, "index.json")
        index = {}
        if os.path.exists(index_path):
            with open(index_path, encoding="utf-8") as handle:
                index = json.load(handle)
        known = len(index)
        for number, item in enumerate(files, start=known):
            path = item["path"]
            if path in index:
                continue
            if os.path.exists(path):
                saved = os.path.join(self.backup_dir, f"{number:03d}-{os.path.basename(path)}")
                shutil.copy2(path, saved)
                os.chmod(saved, 0o600)
                index[path] = saved
            else:
                index[path] = None
        if len(index) == known:
            return
        fd, tmp = tempfile.mkstemp(dir=self.backup_dir)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(index, handle, indent=2)
        os.replace(tmp, index_path)

    # -- the operations -----------------------------------------------------------------------------
    def stage(self, drifted: list[dict], changes: list[dict]) -> None:
        """Back up, then write every new file whole beside its destination (``changes[i]["staged"]``).
        Any failure removes what was staged and fails with nothing the engine reads changed."""
        done: list[str] = []
        try:
            self.take_backup(drifted)
            for number, item in enumerate(drifted):
                path = item["path"]
                self.read(path)  # refuses a symbolic link planted since the comparison
                if item["content"] is None:
                    continue  # a removal: nothing to prepare
                name = os.path.basename(self.staged_path(path))
                done.append(path)
                changes[number]["staged"] = self.write_whole(os.path.dirname(path), item["content"], name)
        except OSError as exc:
            self.remove_staged(done)
            where = done[-1] if done else self.backup_dir
            raise FileError(
                f"could not prepare the new {done[-1] if done else 'backup in ' + self.backup_dir}: {exc}. "
                "Nothing was changed: the current files, the engine and the node are as they were",
                where,
            ) from exc

    def write(self, drifted: list[dict]) -> None:
        """Put every drifted file in place (content None: remove it): by renaming what stage() prepared,
        else by writing it now."""
        try:
            self.take_backup(drifted)
        except OSError as exc:
            raise FileError(
                f"could not back up the current files in {self.backup_dir}: {exc}; nothing was written"
            ) from exc
        for item in drifted:
            path = item["path"]
            if item["content"] is None:
                try:
                    os.unlink(path)
                except FileNotFoundError:
                    pass
                except OSError as exc:
                    raise FileError(f"could not remove {path}: {exc}", path) from exc
                continue
            staged = self.take_staged(path, item["content"])
            if staged is None:
                self.write_atomically(path, item["content"])
                continue
            try:
                self.put_in_place(staged, path)
            except OSError as exc:
                raise FileError(f"could not put {path} in place: {exc}; the previous file is unchanged", path) from exc

    def restore(self) -> dict:
        """Every file this run backed up, back as it was (one it created removed). The module's result."""
        index_path = os.path.join(self.backup_dir, "index.json")
        if not os.path.exists(index_path):
            return {
                "changed": False,
                "changes": [],
                "restart_required": False,
                "backup_found": False,
                "msg": f"no backup {self.backup_id}: nothing was written",
            }
        with open(index_path, encoding="utf-8") as handle:
            index = json.load(handle)
        changes = []
        if not self.check_mode:
            self.remove_staged(list(index))
        for path, saved in sorted(index.items()):
            current = self.read(path)
            if saved is None:
                if current is not None:
                    changes.append({"path": path, "kind": "backup", "action": "remove", "restart": True})
                    if not self.check_mode:
                        os.unlink(path)
                continue
            with open(saved, encoding="utf-8") as handle:
                previous = handle.read()
            if previous != current:
                changes.append({"path": path, "kind": "backup", "action": "restore", "restart": True})
                if not self.check_mode:
                    self.write_atomically(path, previous)
        return {
            "changed": bool(changes),
            "changes": changes,
            "restart_required": bool(changes),
            "backup_dir": self.backup_dir,
            "backup_found": True,
        }

    def clean(self, roots: list[str], directories: list[str]) -> list[dict]:
        """Remove the temporary files a write leaves only when interrupted between create and rename:
        in ``roots`` (cargoship's own directories) recursively, in ``directories`` at their top only."""
        changes = []
        places = [(root, True) for root in roots] + [(directory, False) for directory in directories]
        for root, recursive in places:
            for directory, _dirs, names in os.walk(root):
                for name in names:
                    path = os.path.join(directory, name)
                    if name.startswith(TEMP_PREFIX) and os.path.isfile(path) and not os.path.islink(path):
                        changes.append({"path": path, "kind": "temporary", "action": "remove", "restart": False})
                        if not self.check_mode:
                            os.unlink(path)
                if not recursive:
                    break
        return changes
