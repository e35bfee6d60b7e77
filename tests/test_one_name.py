"""One name per meaning (issue 20): a public class or type alias is defined in one
module of the package. Two definitions of one name are either one meaning copied
(the CLI once copied ``WorkloadClass``, ``TopologyMode`` and ``Role``; it now
imports them) or two meanings sharing a word (the agent's instruction was called
``Decision`` like the engine's decision; it is now ``Instruction``). Both make a
reader ask which one they hold. The few names kept twice are listed with why."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "apportion"

#: name -> the modules allowed to define it, and why that is one meaning
ALLOWED: dict[str, tuple[frozenset[str], str]] = {
    "Page": (frozenset({"store/repos/paging.py", "client/base.py"}),
             "one page of a list on each side of HTTP: rows with the next id in the store, "
             "JSON items with the opaque next_token in the client (the client may not "
             "import the store)"),
}


def _definitions() -> dict[str, list[str]]:
    """Public module-level classes and capitalised type aliases, by name."""
    found: dict[str, list[str]] = defaultdict(list)
    for path in sorted(SRC.rglob("*.py")):
        module = path.relative_to(SRC).as_posix()
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            names: list[str] = []
            if isinstance(node, ast.ClassDef):
                names = [node.name]
            elif isinstance(node, ast.Assign):
                names = [t.id for t in node.targets if isinstance(t, ast.Name)]
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                names = [node.target.id]
            for name in names:
                if name[:1].isupper() and not name.isupper() and not name.startswith("_"):
                    found[name].append(module)
    return found


def test_no_public_name_is_defined_twice() -> None:
    twice = {name: modules for name, modules in _definitions().items()
             if len(modules) > 1 and frozenset(modules) != ALLOWED.get(name, (None,))[0]}
    assert twice == {}, f"defined in more than one module: {twice}"


@pytest.mark.parametrize(("name", "module"), [
    ("WorkloadClass", "domain/workload.py"),
    ("TopologyMode", "domain/workload.py"),
    ("Decision", "engine/plan.py"),
    ("Instruction", "agent/model.py"),
    ("Role", "service/context.py"),
    ("Packing", "domain/cluster.py"),
])
def test_the_shared_names_live_in_one_place(name: str, module: str) -> None:
    assert _definitions()[name] == [module]


def test_the_allowed_pairs_still_exist() -> None:
    """An allowance for a name no longer defined twice is removed, not kept."""
    defs = _definitions()
    for name, (modules, _why) in ALLOWED.items():
        assert sorted(defs[name]) == sorted(modules), name
