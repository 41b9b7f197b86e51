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


def _edges(graph: grimp.ImportGraph) -> set[tuple[str, str]]:
    return {
        (_package(importer), _package(imported))
        for importer in graph.modules
        for imported in graph.find_modules_directly_imported_by(importer)
        if _package(importer) != _package(imported)
    }


def _package_cycle(edges: set[tuple[str, str]]) -> list[str]:
    """One cycle of the package graph (the re-exporting root `flower` left out), or [] when it has none."""
    after: dict[str, set[str]] = {}
    for a, b in edges:
        if "flower" not in (a, b):
            after.setdefault(a, set()).add(b)
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str]:
        state[node] = 1
        path.append(node)
        for nxt in sorted(after.get(node, ())):
            if state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        state[node] = 2
        path.pop()
        return []

    for node in sorted(after):
        if node not in state and (found := visit(node)):
            return found
    return []


def test_package_cycle_finder() -> None:
    assert _package_cycle({("flower.a", "flower.b"), ("flower.b", "flower.c")}) == []
    assert _package_cycle({("flower.a", "flower.b"), ("flower.b", "flower.c"), ("flower.c", "flower.a")}) == [
        "flower.a", "flower.b", "flower.c", "flower.a"]
    assert _package_cycle({("flower", "flower.a"), ("flower.a", "flower")}) == []


def test_no_package_imports_a_package_that_imports_it_back(graph: grimp.ImportGraph) -> None:
    """Packages form a layered graph (lazy and TYPE_CHECKING imports included): no cycle of any length."""
    assert _package_cycle(_edges(graph)) == []


def test_lower_layers_stay_below(graph: grimp.ImportGraph) -> None:
    """The walls know no spec, no store and no runtime; agents and stores never reach the runtime."""
    edges = _edges(graph)
    below = {
        "flower.util": {"flower.errors"},
        "flower.walls": {"flower.errors", "flower.texts", "flower.util"},
        "flower.agent": {"flower.errors", "flower.texts", "flower.util", "flower.walls"},
        "flower.workbench": {"flower.errors", "flower.texts", "flower.util"},
        "flower.stores": {"flower.errors", "flower.texts", "flower.util", "flower.walls", "flower.agent"},
    }
    for package, allowed in below.items():
        assert {b for a, b in edges if a == package} <= allowed, package


def test_packages_depend_in_one_direction(graph: grimp.ImportGraph) -> None:
    edges = _edges(graph)
    # The command line sits on top: only `python -m flower` reaches it.
    assert {a for a, b in edges if b == "flower.cli"} <= {"flower.__main__"}
    # Reading a run back never needs the command line, the workflow engine or the human channel.
    assert not {b for a, b in edges if a == "flower.report"} & {"flower.cli", "flower.flow", "flower.human"}
    # The scripted fake API stands alone: it knows flower's errors and nothing else, but for its `flower go`
    # scripts (`flower.testing.go`), written by the documents go parses (issue #28 item 7).
    assert {b for a, b in edges if a == "flower.testing"} <= {"flower.errors", "flower.go", "flower.human"}
    outside = {m for m in {"flower.testing", *graph.find_descendants("flower.testing")}
               for imported in graph.find_modules_directly_imported_by(m)
               if imported.split(".")[:2] not in (["flower", "testing"], ["flower", "errors"])
               and imported.startswith("flower.")}
    assert outside <= {"flower.testing.go"}, outside
    # The library itself (`import flower`) never pulls in the command line or the readers.
    assert not {b for a, b in edges if a == "flower"} & {"flower.cli", "flower.report"}
