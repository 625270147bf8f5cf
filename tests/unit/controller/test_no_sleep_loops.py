"""No hand-written periodic loop in app/controller: periodic work is a row of
:mod:`app.controller.services` (posted to the owning app's queue, one failure policy), a one-shot
timer a :class:`~app.controller.services.Deadline`. A ``while`` loop that sleeps (``hub.sleep(``) or
waits with a timeout (``.wait(timeout=``) fails this test unless it is listed below with its reason."""
from __future__ import annotations

import ast
from pathlib import Path

CONTROLLER = Path(__file__).resolve().parents[3] / "app" / "controller"

#: (module, function) -> why that loop is not periodic work
ALLOWED = {
    ("live_southbound.py", "wait_ports_up"): "a plan step waits for the ports it lit, in the plan's greenthread",
    ("live_southbound.py", "wait_link"): "a plan step waits for LLDP to see the new link, in the plan's greenthread",
    ("scan_runner.py", "_wait_settled"): "an optical scan waits for the port reports of what it lit to stop",
    ("scan_runner.py", "_wait_down"): "an optical scan waits for the ports it darkened to go down",
    ("mapping_app.py", "_acquire"): "a REST call waits (bounded) for the one mapping plan that runs",
}


def _waits(node: ast.AST) -> bool:
    """``hub.sleep(...)`` or ``<x>.wait(timeout=...)`` anywhere in ``node``."""
    for call in ast.walk(node):
        if not isinstance(call, ast.Call) or not isinstance(call.func, ast.Attribute):
            continue
        f = call.func
        if f.attr == "sleep" and isinstance(f.value, ast.Name) and f.value.id == "hub":
            return True
        if f.attr == "wait" and any(k.arg == "timeout" for k in call.keywords):
            return True
    return False


class _Loops(ast.NodeVisitor):
    def __init__(self) -> None:
        self.where: list[str] = ["<module>"]
        self.found: list[tuple[str, int]] = []

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        self.where.append(node.name)
        self.generic_visit(node)
        self.where.pop()

    visit_AsyncFunctionDef = visit_FunctionDef  # type: ignore[assignment]

    def visit_While(self, node: ast.While) -> None:
        if _waits(node):
            self.found.append((self.where[-1], node.lineno))
        self.generic_visit(node)


def sleeping_loops() -> list[tuple[str, str, int]]:
    out = []
    for path in sorted(CONTROLLER.glob("*.py")):
        finder = _Loops()
        finder.visit(ast.parse(path.read_text(), filename=str(path)))
        out += [(path.name, fn, line) for fn, line in finder.found]
    return out


def test_no_app_module_sleeps_in_a_loop():
    bad = [f"{m}:{line} in {fn}()" for m, fn, line in sleeping_loops() if (m, fn) not in ALLOWED]
    assert bad == [], "periodic work belongs in app.controller.services (a Service row or a Deadline): " + ", ".join(bad)


def test_the_allow_list_has_no_stale_entries():
    found = {(m, fn) for m, fn, _ in sleeping_loops()}
    assert set(ALLOWED) <= found, f"no longer a sleeping loop: {sorted(set(ALLOWED) - found)}"


def test_the_check_sees_a_sleeping_loop():
    finder = _Loops()
    finder.visit(ast.parse("def poll():\n    while True:\n        work()\n        hub.sleep(1)\n"
                           "def stop_wait(stop):\n    while not stop.wait(timeout=0.02):\n        send()\n"))
    assert finder.found == [("poll", 2), ("stop_wait", 6)]
