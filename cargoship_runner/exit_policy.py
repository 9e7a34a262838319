"""How a run's outcome becomes the command's exit code: one pure function, so that every combination
is tested without hosts."""

from __future__ import annotations

from dataclasses import dataclass

EXIT_OK, EXIT_FAILED, EXIT_WORK_FOUND, EXIT_UNREACHABLE, EXIT_LOCKED, EXIT_USAGE, EXIT_INTERRUPTED = (
    0,
    1,
    2,
    3,
    4,
    64,
    130,
)


@dataclass(frozen=True)
class Ending:
    code: int
    message: str | None = None  # what the command says last, on the error stream


def locked_hosts(report: dict | None) -> dict[str, str]:
    """Hosts another run's lock stopped, and that run (the report's ``locked_by``)."""
    found = {}
    for phase in (report or {}).get("phases", []):
        for host, detail in phase["hosts"].items():
            if detail.get("locked_by"):
                found.setdefault(host, detail["locked_by"])
    return found


def ending(
    *,
    rc: int,
    report: dict | None,
    interrupted: bool = False,
    handler_failed: bool = False,
    unreachable: tuple | list = (),
    dry_run: bool = False,
    detailed_exitcode: bool = False,
) -> Ending:
    """The exit code and last word, by precedence: interrupted, the command's own failure, unreachable,
    locked, failed, work found."""
    if interrupted:
        return Ending(EXIT_INTERRUPTED, "interrupted")
    if handler_failed:
        return Ending(EXIT_FAILED, "failed: the run was stopped by cargoship itself (see above)")
    if unreachable:
        return Ending(EXIT_UNREACHABLE, f"unreachable: {', '.join(unreachable)}")
    locked = locked_hosts(report)
    if locked:
        return Ending(
            EXIT_LOCKED, "; ".join(f"{host} is locked by {holder}" for host, holder in sorted(locked.items()))
        )
    if rc != 0 or not report:
        # No report means nothing was looked at: never "in sync" (a CI gate would read exit 0 so).
        return Ending(EXIT_FAILED)
    if dry_run and detailed_exitcode and report.get("work_found"):
        return Ending(EXIT_WORK_FOUND)
    return Ending(EXIT_OK)
