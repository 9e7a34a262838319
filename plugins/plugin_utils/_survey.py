# Copyright: cargoship developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The control host's side of host_survey: give a task the answer its host already gave.

A task of host_info, host_lock, engine_info or engine_config given ``survey`` (the registered result of
a host_survey task on the same host) gets the answer to the call with the same arguments, without a
round to the host. Which answers hold:

- host_info reads what no run changes (the OS, the network, the clock, the firewall): its answers hold
  in a real run too;
- engine_info, host_lock and engine_config read what a run changes (the engine's state, the lock, the
  files), and the survey is made before this run holds the lock: another run could finish in between.
  Only a task in check mode (the dry run, which changes nothing) takes their answers; a real run reads
  them again on the host, under its lock.

  One exception: engine_config's ``cleaned`` finding nothing to clean holds in a real run too, for a task
  that is given the survey only where this run wrote nothing (the disconnect phase). Leftovers come from
  a write that was interrupted; a run interrupted after this survey held the lock when this run asked
  for it, and this run would have stopped there.

An answer is given only for the same arguments; a difference, however small, sends the task to its host.

A real run's engine reads have a source of their own: the lock's round (host_lock with ``read_planned``)
answers, once this run holds the host's lock, the reads its prepare phases would otherwise make again on
the host (plugin_utils/_reads.py, ``lock_calls``); those answers hold in that real run.

A real run's clean-up has a third source: the comparison its sync phase made of the host's files, under
this run's lock (engine_config lists the leftovers it finds in check mode). Where that found
no leftovers, there is nothing to clean if this run wrote nothing on the host since (nothing to change), or
if the sync that wrote there finished: a write leaves a temporary file only when it is interrupted, and an
interrupted write fails the sync (``answer_from_comparison``).
"""

from __future__ import annotations

import copy
import time

from ansible.plugins.action import ActionBase
from ansible.utils.vars import merge_hash

from ansible_collections.cargoship.engine.plugins.plugin_utils._host_checks import narrowed_clock

HOLD_IN_A_REAL_RUN = frozenset(("host_info",))
# Arguments that name a moment, not a question: host_info's clock is read against the control host's
# clock of its own call, and narrowed by when its answer came back (timed_answer).
MOMENTS = {"host_info": frozenset(("reference_epoch",))}


def comparable(module: str, args: dict) -> dict:
    ignored = MOMENTS.get(module, frozenset()) | {"credentials", "survey"}
    return {key: value for key, value in args.items() if key not in ignored and value is not None}


def answer_from(survey: object, module: str, args: dict, check_mode: bool, diff_mode: bool) -> dict | None:
    """The survey's answer to ``module`` called with ``args``, or None if the host has to be asked."""
    if not isinstance(survey, dict) or survey.get("failed") or survey.get("skipped"):
        return None
    # In a real run, an answer of what the run changes holds only if it found nothing to clean; so too for a
    # task in check mode inside a real run (a sync phase's comparison), whose survey was made before the lock
    # (a real run's survey asks those reads only to check a reviewed plan).
    made_in_dry_run = bool(survey.get("dry_run"))
    # Answers the lock's own round made once this run held the lock (host_lock with read_planned) hold in
    # this real run: they are the reads its phases would make again under the lock, before it changes anything.
    made_under_lock = bool(survey.get("under_lock")) and not check_mode
    only_if_nothing_found = (
        not (check_mode and made_in_dry_run) and not made_under_lock and module not in HOLD_IN_A_REAL_RUN
    )
    if only_if_nothing_found and not nothing_to_clean(module, args):
        return None
    if bool(survey.get("diff_mode")) != bool(diff_mode) and module == "engine_config":
        return None
    wanted = comparable(module, args)
    for item in survey.get("answers") or []:
        if item.get("module") != module or comparable(module, item.get("args") or {}) != wanted:
            continue
        result = item.get("result") or {}
        if result.get("skipped"):
            return None
        if only_if_nothing_found and (result.get("changed") or result.get("failed")):
            return None  # something to clean: the host does it
        return {**copy.deepcopy(result), "answered_by": "host_lock" if made_under_lock else "host_survey"}
    return None


def nothing_to_clean(module: str, args: dict) -> bool:
    """A call whose survey answer holds in a real run when it found nothing (see the module docstring)."""
    return module == "engine_config" and args.get("state") == "cleaned"


def answer_from_comparison(module: str, args: dict, compared: object, synced: bool = False) -> dict | None:
    """The clean-up's answer from this run's comparison of the host's files (``compared``, an engine_config
    result of the same engine and layout), or None if the host has to be asked (see the module docstring).
    Files the comparison found to change leave nothing behind once the sync that wrote them finished
    (``synced``): a write leaves a temporary file only when interrupted, and that fails the sync."""
    if not nothing_to_clean(module, args) or not isinstance(compared, dict):
        return None
    if compared.get("failed") or compared.get("skipped") or (compared.get("changes") and not synced):
        return None
    if compared.get("leftovers") != []:
        return None  # some found, or an answer that does not say
    return {"changed": False, "changes": [], "restart_required": False, "answered_by": "comparison"}


def answer_or_ask(action: ActionBase, module: str, args: dict, survey: object, task_vars: dict) -> dict:
    """The survey's answer to the call, else the module's on the host (``args`` as the module gets them)."""
    found = answer_from(survey, module, args, bool(action._play_context.check_mode), bool(action._task.diff))
    if found is None:
        found = action._execute_module(module_name=f"cargoship.engine.{module}", module_args=args, task_vars=task_vars)
        found = timed_answer(module, found, time.time())
    return found


def timed_answer(module: str, result: dict, answered: float) -> dict:
    """A host's answer as the control host takes it: host_info's clock skew narrowed by the moment the answer
    came back (``answered``), so that the time the call took is not counted as skew (_host_checks.py)."""
    if module == "host_info" and isinstance(result, dict) and "clock" in result:
        return {**result, "clock": narrowed_clock(result["clock"], answered)}
    return result


def timed_survey(result: dict, answered: float) -> dict:
    """A host_survey's result with each of its host_info answers narrowed as ``timed_answer`` does."""
    answers = result.get("answers") if isinstance(result, dict) else None
    if not isinstance(answers, list):
        return result
    timed = [{**item, "result": timed_answer(item.get("module"), item.get("result"), answered)} for item in answers]
    return {**result, "answers": timed}


class SurveyAnsweredAction(ActionBase):
    """The action plugin of a module host_survey can answer for: the survey's answer, else the module."""

    MODULE = ""
    TRANSFERS_FILES = False

    def module_args(self, args: dict) -> dict:
        """The arguments as the module gets them (engine_config moves its credentials out)."""
        return args

    def task_args(self, task_vars: dict) -> dict:
        """The task's arguments, as the action takes them."""
        return dict(self._task.args)

    def run(self, tmp=None, task_vars=None):
        self._supports_check_mode = True
        result = super().run(tmp, task_vars)
        args = self.task_args(task_vars)
        survey = args.pop("survey", None)
        found = answer_or_ask(self, self.MODULE, self.module_args(args), survey, task_vars)
        return merge_hash(result, found)
