# Copyright: cargoship developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters for the decisions a phase takes from what it read (plugin_utils/_phase_rules.py), so that the real
run's tasks and a dry run's play assessment take them with the same code."""

from __future__ import annotations

from ansible_collections.cargoship.engine.plugins.plugin_utils._phase_rules import (
    charts_kept,
    cis_refusal,
    engine_state,
    restart_mode,
    restart_reason,
)


class FilterModule:
    def filters(self):
        return {
            "restart_reason": restart_reason,
            "restart_mode": restart_mode,
            "cis_refusal": cis_refusal,
            "charts_kept": charts_kept,
            "engine_state": engine_state,
        }
