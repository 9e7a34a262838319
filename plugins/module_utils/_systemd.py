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


def show_units(module, units: list, properties: list) -> dict:
    """``systemctl show`` of several units in one call: their properties by unit, as systemd gives them
    (a unit it does not know has C(LoadState=not-found); an empty property may be left out). Empty when
    there is no systemctl or it fails."""
    systemctl = module.get_bin_path("systemctl")
    if not systemctl or not units:
        return {}
    rc, out, _err = module.run_command([systemctl, "show", f"--property={','.join(properties)}", *units])
    if rc != 0:
        return {}
    # One block per unit, in the order asked, separated by an empty line.
    blocks = out.strip("\n").split("\n\n")
    if len(blocks) != len(units):
        return {}
    return {unit: parse_properties(blocks[index]) for index, unit in enumerate(units)}


def parse_properties(text: str) -> dict:
    """``Key=value`` lines, the value kept whole (it may hold ``=``)."""
    return dict(line.split("=", 1) for line in text.splitlines() if "=" in line)
