# Copyright: cargoship developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""This collection's module payloads, kept from one run to the next.

Ansible sends a module to a host as a payload it builds on the control host (AnsiballZ: the module and the
module_utils it imports, which it finds by parsing their source, ``ansible.module_utils.basic`` and all it
imports included). It builds each module's payload once per ansible-playbook process, in a cache inside that
process's own temporary directory, which it removes at the end: every run parses the same sources again,
about 0.2 s of the control host's CPU per module a run uses.

Here this collection's payloads are kept in the user's cache directory between runs and put into a run's
cache before its first task, so that Ansible finds them built. They are kept under a key that changes with
everything a payload is made of: ansible-core (its version and its module_utils files), this collection's
modules and module_utils, and Python's version. Only this collection's modules are kept, never another
collection's or a user's. The directory must be the user's own and closed to others (Ansible reads a payload
with pickle): where it is not, nothing is kept or read.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sys
import tempfile

PREFIX = "ansible_collections.cargoship.engine.plugins.modules."
COLLECTION = os.path.realpath(os.path.join(os.path.dirname(__file__), "..", ".."))


def key(collection: str = COLLECTION) -> str:
    """A digest of everything this collection's payloads are built from."""
    import ansible
    from ansible.release import __version__

    digest = hashlib.sha256(f"{__version__}\0{sys.version}\0{ansible.__file__}\0".encode())
    for top in (os.path.join(collection, "plugins", "modules"), os.path.join(collection, "plugins", "module_utils")):
        for path in sorted(_python_files(top)):
            with open(path, "rb") as handle:
                digest.update(os.path.relpath(path, collection).encode() + b"\0" + handle.read() + b"\0")
    # ansible-core's own module_utils, by size and time: a changed file in an installed release changes the key.
    core = os.path.join(os.path.dirname(ansible.__file__), "module_utils")
    for path in sorted(_python_files(core)):
        info = os.stat(path)
        digest.update(f"{os.path.relpath(path, core)}\0{info.st_size}\0{info.st_mtime_ns}\0".encode())
    return digest.hexdigest()[:16]


def _python_files(top: str) -> list[str]:
    return [
        os.path.join(directory, name)
        for directory, _dirs, names in os.walk(top)
        for name in names
        if name.endswith(".py")
    ]


def kept_directory(base: str | None = None) -> str | None:
    """The directory of this key's payloads, made if needed; None where it is not the user's own, closed to
    others (then nothing is kept or read)."""
    base = base or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "cargoship", "ansiballz"
    )
    directory = os.path.join(base, key())
    try:
        for path in (base, directory):
            os.makedirs(path, mode=0o700, exist_ok=True)
            info = os.lstat(path)
            if os.path.islink(path) or not os.path.isdir(path) or info.st_uid != os.getuid():
                return None
            if info.st_mode & 0o077:
                os.chmod(path, 0o700)  # the user's own: closed to others before anything is read from it
    except OSError:
        return None
    return directory


def ours(name: str) -> bool:
    return name.startswith(PREFIX) and not name.endswith(".lock") and os.sep not in name


def copy_in(source: str, directory: str, name: str) -> None:
    """Copy ``source`` to ``directory/name`` whole or not at all (a reader never sees half a payload)."""
    fd, temporary = tempfile.mkstemp(prefix=".part-", dir=directory)
    os.close(fd)
    try:
        shutil.copyfile(source, temporary)
        os.chmod(temporary, 0o600)
        os.replace(temporary, os.path.join(directory, name))
    except OSError:
        if os.path.exists(temporary):
            os.unlink(temporary)
        raise


def copy_missing(source: str, target: str) -> int:
    """Copy this collection's payloads that ``target`` lacks from ``source``; how many."""
    count = 0
    for name in os.listdir(source):
        if ours(name) and not os.path.exists(os.path.join(target, name)):
            copy_in(os.path.join(source, name), target, name)
            count += 1
    return count


def seed(run_cache: str, kept: str) -> int:
    """Put the kept payloads into a run's cache before its first task; how many."""
    os.makedirs(run_cache, exist_ok=True)
    return copy_missing(kept, run_cache)


def keep(run_cache: str, kept: str) -> int:
    """Keep the payloads a run built that are not kept yet; how many."""
    return copy_missing(run_cache, kept) if os.path.isdir(run_cache) else 0
