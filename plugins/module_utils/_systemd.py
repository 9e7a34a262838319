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
    (a unit it does not know has C(LoadState=not-found); an empty property may be left out). A unit
    systemctl could not be asked about is left out."""
    systemctl = module.get_bin_path("systemctl")
    if not systemctl or not units:
        return {}
    rc, out, _err = module.run_command([systemctl, "show", f"--property={','.join(properties)}", *units])
    # One block per unit, in the order asked, separated by an empty line.
    blocks = out.strip("\n").split("\n\n")
    if rc == 0 and len(blocks) == len(units):
        return {unit: parse_properties(blocks[index]) for index, unit in enumerate(units)}
    if len(units) == 1:
        return {}
    # An answer that cannot be matched to the units block by block: ask about each unit alone.
    shown = {}
    for unit in units:
        shown.update(show_units(module, [unit], properties))
    return shown


def parse_properties(text: str) -> dict:
    """``Key=value`` lines, the value kept whole (it may hold ``=``)."""
    return dict(line.split("=", 1) for line in text.splitlines() if "=" in line)
