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


def test_every_file_that_make_docs_writes_is_up_to_date():
    """The phase and settings tables of the page, every role's argument specs (phase descriptions and
    cargoship_* options) and the roles' generated defaults."""
    files = docs.generated_files()
    assert len([path for path in files if path.name == "argument_specs.yml"]) >= 14
    stale = [str(path.relative_to(docs.CHECKOUT)) for path, text in files.items() if path.read_text() != text]
    assert not stale, f"stale, run `make docs`: {', '.join(stale)}"


def test_every_test_the_reliability_page_cites_exists():
    page = (docs.DOCS / "reliability.md").read_text()
    cited = re.findall(r"`((?:tests/unit/)?test_\w+\.py)(?:::(\w+))?`", page)
    assert len(cited) >= 15
    for module, function in cited:
        path = docs.CHECKOUT / (module if module.startswith("tests/") else f"tests/integration/{module}")
        assert path.exists(), f"docs/reliability.md cites {module}, which does not exist"
        if function:
            assert f"def {function}(" in path.read_text(), f"docs/reliability.md cites {module}::{function}, gone"
