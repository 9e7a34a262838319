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

import base64
import dataclasses
import hashlib
import importlib.util
import io
import marshal
import os
import pickle
import shutil
import sys
import tempfile
import zipfile

PREFIX = "ansible_collections.cargoship.engine.plugins.modules."
COLLECTION = os.path.realpath(os.path.join(os.path.dirname(__file__), "..", ".."))
# What a kept payload holds beside Ansible's own build: part of the key, so that payloads kept by a release
# that added less are built again.
KEPT_FORMAT = "with-bytecode-1"


def key(collection: str = COLLECTION) -> str:
    """A digest of everything this collection's payloads are built from."""
    import ansible
    from ansible.release import __version__

    digest = hashlib.sha256(f"{KEPT_FORMAT}\0{__version__}\0{sys.version}\0{ansible.__file__}\0".encode())
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


def put_whole(directory: str, name: str, write) -> None:
    """Make ``directory/name`` with ``write(path)`` on a temporary file beside it, then a rename: whole or not
    at all (a reader never sees half a payload)."""
    fd, temporary = tempfile.mkstemp(prefix=".part-", dir=directory)
    os.close(fd)
    try:
        write(temporary)
        os.chmod(temporary, 0o600)
        os.replace(temporary, os.path.join(directory, name))
    except OSError:
        if os.path.exists(temporary):
            os.unlink(temporary)
        raise


def copy_in(source: str, directory: str, name: str) -> None:
    """Copy ``source`` to ``directory/name`` whole or not at all."""
    put_whole(directory, name, lambda temporary: shutil.copyfile(source, temporary))


def write_bytes(path: str, data: bytes) -> None:
    with open(path, "wb") as handle:
        handle.write(data)


def copy_missing(source: str, target: str, copy=copy_in) -> int:
    """Copy this collection's payloads that ``target`` lacks from ``source`` (with ``copy``); how many."""
    count = 0
    for name in os.listdir(source):
        if ours(name) and not os.path.exists(os.path.join(target, name)):
            copy(os.path.join(source, name), target, name)
            count += 1
    return count


# A .pyc header's flags (PEP 552): validated against the source's hash, not its time (a zip entry's time has
# a resolution of two seconds, and the payload is written anew on every host).
CHECKED_HASH = 0b11


def bytecode_of(source: bytes, name: str) -> bytes:
    """A ``.pyc`` of ``source`` for this Python (compiled as the host's Python compiles it: no optimisation)."""
    code = compile(source, name, "exec", dont_inherit=True, optimize=0)
    header = importlib.util.MAGIC_NUMBER + CHECKED_HASH.to_bytes(4, "little") + importlib.util.source_hash(source)
    return header + marshal.dumps(code)


def zip_with_bytecode(zip_data: bytes) -> bytes:
    """The payload's zip with a ``.pyc`` beside each ``.py`` it holds (what zipimport looks for first)."""
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(zip_data)) as payload, zipfile.ZipFile(out, "w") as enriched:
        present = set(payload.namelist())
        for entry in payload.infolist():
            data = payload.read(entry)
            enriched.writestr(entry, data)
            compiled = entry.filename[:-3] + ".pyc"
            if entry.filename.endswith(".py") and compiled not in present:
                info = zipfile.ZipInfo(compiled, entry.date_time)
                info.compress_type = entry.compress_type
                enriched.writestr(info, bytecode_of(data, entry.filename))
    return out.getvalue()


def keep_with_bytecode(source: str, directory: str, name: str) -> None:
    """Keep a payload the run built, its zip given each Python file's bytecode. Ansible's cached payload is
    its own pickled record with the zip as base64 (``zip_data``); a record of another shape, or a zip that
    does not compile, is kept as it was built."""
    try:
        with open(source, "rb") as handle:
            # This run's own cache: written by Ansible in this process's private temporary directory.
            built = pickle.load(handle)
        enriched = dataclasses.replace(
            built, zip_data=base64.b64encode(zip_with_bytecode(base64.b64decode(built.zip_data, validate=True)))
        )
        data = pickle.dumps(enriched)
    except Exception:  # an unexpected shape costs the bytecode, never the payload
        copy_in(source, directory, name)
        return
    put_whole(directory, name, lambda temporary: write_bytes(temporary, data))


def seed(run_cache: str, kept: str) -> int:
    """Put the kept payloads into a run's cache before its first task; how many."""
    os.makedirs(run_cache, exist_ok=True)
    return copy_missing(kept, run_cache)


def keep(run_cache: str, kept: str) -> int:
    """Keep the payloads a run built that are not kept yet; how many."""
    return copy_missing(run_cache, kept, keep_with_bytecode) if os.path.isdir(run_cache) else 0
