"""Every lab of ``mlte lab list`` has a CI check marked ``lab("<name>")``: ``make test-labs`` runs the
tests with that marker (it once named the lab test files in a hand-kept list, which a new lab's test
had to be added to by hand)."""
from __future__ import annotations

import ast
from pathlib import Path

from mininet_labs.registry import LABS

INTEGRATION = Path(__file__).resolve().parents[2] / "integration"


def lab_markers() -> dict[str, list[str]]:
    """Lab name -> the integration test files that carry ``pytest.mark.lab("<name>")``."""
    found: dict[str, list[str]] = {}
    for path in sorted(INTEGRATION.glob("test_*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "lab"
                    and isinstance(node.func.value, ast.Attribute) and node.func.value.attr == "mark"):
                for arg in node.args:
                    assert isinstance(arg, ast.Constant) and isinstance(arg.value, str), (path, ast.dump(arg))
                    found.setdefault(arg.value, []).append(path.name)
    return found


def test_every_lab_has_a_ci_check_marked_with_its_name() -> None:
    marked = lab_markers()
    assert sorted(set(LABS) - set(marked)) == [], "labs without a test marked lab(name)"
    assert sorted(set(marked) - set(LABS)) == [], "lab markers naming no lab of `mlte lab list`"


def test_the_markers_are_found_where_they_are() -> None:
    marked = lab_markers()
    assert marked["xcon-downtime"] == ["test_labs_issue13.py"] and marked["multihoming"] == ["test_multihoming_lab.py"]
