# Copyright: cargoship developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations


class ModuleDocFragment:
    # The survey option of the modules whose read-only calls host_survey answers.
    DOCUMENTATION = r"""
options:
  survey:
    description:
      - The registered result of a M(cargoship.engine.host_survey) task on this host. When it holds the
        answer to a call with these arguments, the task gives that answer back on the control host, without
        going to the host again. In a real run only M(cargoship.engine.host_info) answers are used, since
        what runs change is read again under the run's lock.
      - Also the registered result of a M(cargoship.engine.host_lock) task that took this run's lock on this
        host with O(cargoship.engine.host_lock#module:reads). Its answers were made under the lock, and a real
        run uses them.
      - Otherwise the module runs on the host as usual.
    type: dict
"""
