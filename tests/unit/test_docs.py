from __future__ import annotations

import re

from cargoship_runner import docs


def test_the_operation_page_shows_the_phases_as_declared():
    page = (docs.DOCS / "engine-config-sync.md").read_text()
    assert docs.render(page, "engine-config-sync") == page, "docs/engine-config-sync.md is stale: run `make docs`"


def test_the_table_follows_the_declarations():
    table = docs.phase_table("engine-config-sync")
    assert table.count("\n| ") == 12  # a row per phase
    assert "| 11 | unlock |" in table and "**unassessed** (a dry run takes no lock" in table
    assert "| 1 | connect | **Connect to hosts.**" in table


def test_phase_roles_argument_specs_describe_the_phases_as_declared():
    for phase in docs.phases():
        path = docs.CHECKOUT / "roles" / phase["name"] / "meta" / "argument_specs.yml"
        current = path.read_text()
        assert docs.argument_specs(phase, current) == current, f"{path} is stale: run `make docs`"


def test_every_test_the_reliability_page_cites_exists():
    page = (docs.DOCS / "reliability.md").read_text()
    cited = re.findall(r"`((?:tests/unit/)?test_\w+\.py)(?:::(\w+))?`", page)
    assert len(cited) >= 15
    for module, function in cited:
        path = docs.CHECKOUT / (module if module.startswith("tests/") else f"tests/integration/{module}")
        assert path.exists(), f"docs/reliability.md cites {module}, which does not exist"
        if function:
            assert f"def {function}(" in path.read_text(), f"docs/reliability.md cites {module}::{function}, gone"
