# Copyright: cargoship developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
name: payload_cache
type: aggregate
short_description: Keeps this collection's module payloads from one run to the next
version_added: 0.1.0
description:
  - Ansible builds the payload of each module it sends to a host (the module and the module_utils it imports)
    once per ansible-playbook process and removes it at the end; building one parses
    C(ansible.module_utils.basic) and all it imports, about 0.2 s of the control host's CPU per module a run
    uses.
  - This callback keeps the payloads of this collection's modules in the user's cache directory
    (C($XDG_CACHE_HOME/cargoship/ansiballz), by default C(~/.cache/cargoship/ansiballz)) and puts them into
    the run's own cache before its first task. They are kept under a key of everything they are built from
    (ansible-core, this collection's modules and module_utils, Python), so a changed source is built again.
  - A payload is kept with the bytecode of each of its Python files, compiled by the control host's Python and
    checked against the source's hash; a host whose Python is of the same version imports it instead of
    compiling Ansible's module code in every module run, any other compiles the source as before.
  - Only this collection's payloads are kept; the directory must belong to the user and be closed to others,
    else nothing is kept or read.
requirements:
  - enable in ansible.cfg (C(callbacks_enabled)) or with ANSIBLE_CALLBACKS_ENABLED; the cargoship command enables it
"""

import os

from ansible import constants as C
from ansible.plugins.callback import CallbackBase

from ansible_collections.cargoship.engine.plugins.plugin_utils import _payload_cache


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "cargoship.engine.payload_cache"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self):
        super().__init__()
        self.kept: str | None = None

    @staticmethod
    def run_cache() -> str:
        # Where Ansible builds this run's payloads (module_common: <local tmp>/ansiballz_cache).
        return os.path.join(C.DEFAULT_LOCAL_TMP, "ansiballz_cache")

    def v2_playbook_on_start(self, playbook):
        try:
            self.kept = _payload_cache.kept_directory()
            if self.kept:
                _payload_cache.seed(self.run_cache(), self.kept)
        except OSError as exc:  # a cache that cannot be used costs time, never the run
            self._display.vvv(f"cargoship payload cache not used: {exc}")
            self.kept = None

    def v2_playbook_on_stats(self, stats):
        if not self.kept:
            return
        try:
            _payload_cache.keep(self.run_cache(), self.kept)
        except OSError as exc:
            self._display.vvv(f"cargoship payload cache not kept: {exc}")
