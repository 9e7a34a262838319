# Copyright: cargoship developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""engine_info: the answer of a host_survey given as ``survey``, else the module on the host."""

from __future__ import annotations

from ansible_collections.cargoship.engine.plugins.plugin_utils._survey import SurveyAnsweredAction


class ActionModule(SurveyAnsweredAction):
    MODULE = "engine_info"
