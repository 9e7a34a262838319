# Copyright: cargoship developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""How cargoship reads an engine's systemd unit: one word for up, the sub-state for everything else."""

from __future__ import annotations


def unit_state(props: dict) -> str:
    """V(active) for a running engine; anything else with its sub-state. The engines' units restart for
    ever, so a crash loop shows as ``activating (auto-restart)``, never as ``failed``."""
    active = props.get("ActiveState", "unknown")
    if active in ("active", "reloading"):
        return "active"
    return f"{active} ({props.get('SubState', 'unknown')})"
