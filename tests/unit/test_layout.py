"""The package layout reads as the architecture (issue #12): no module imports a module that imports it
back, and the packages depend in one direction only.

The graph comes from grimp (the engine of import-linter), which reads every import statement in the
package, including ones inside functions and under `TYPE_CHECKING`: a lazy import does not hide a cycle.
"""

from __future__ import annotations

import grimp
import pytest


@pytest.fixture(scope="module")
def graph() -> grimp.ImportGraph:
    return grimp.build_graph("flower", exclude_type_checking_imports=False)


def _package(module: str) -> str:
    return ".".join(module.split(".")[:2])


def test_no_module_imports_a_module_that_imports_it_back(graph: grimp.ImportGraph) -> None:
    cycles = sorted(
        (importer, imported)
        for importer in graph.modules
        for imported in graph.find_modules_directly_imported_by(importer)
        if importer < imported and graph.chain_exists(importer=imported, imported=importer)
    )
    chains = [graph.find_shortest_chain(importer=b, imported=a) for a, b in cycles]
    assert cycles == [], f"import cycles: {cycles}, closed by {chains}"


def test_packages_depend_in_one_direction(graph: grimp.ImportGraph) -> None:
    edges = {
        (_package(importer), _package(imported))
        for importer in graph.modules
        for imported in graph.find_modules_directly_imported_by(importer)
        if _package(importer) != _package(imported)
    }
    # The command line sits on top: only `python -m flower` reaches it.
    assert {a for a, b in edges if b == "flower.cli"} <= {"flower.__main__"}
    # Reading a run back never needs the command line, the workflow engine or the human channel.
    assert not {b for a, b in edges if a == "flower.report"} & {"flower.cli", "flower.flow", "flower.human"}
    # The scripted fake API stands alone: it knows flower's errors and nothing else.
    assert {b for a, b in edges if a == "flower.testing"} <= {"flower.errors"}
    # The library itself (`import flower`) never pulls in the command line or the readers.
    assert not {b for a, b in edges if a == "flower"} & {"flower.cli", "flower.report"}
