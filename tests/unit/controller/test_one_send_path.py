"""One southbound: every OpenFlow message is built in ``app/controller/ofmsg.py`` and sent by
``OpenFlowSouthbound.send`` (so a gate can stop it and a count sees it). Reads the source of ``app/``."""
from __future__ import annotations

import ast
import re
from pathlib import Path

APP = Path(__file__).resolve().parents[3] / "app"
BUILDER = APP / "controller" / "ofmsg.py"
SOUTHBOUND = APP / "controller" / "openflow_southbound.py"
OFP_CLASS = re.compile(r"^OFP[A-Z]\w*$")  # OFPFlowMod, OFPPacketOut, OFPMatch, OFPActionOutput...


def _calls(path: Path) -> list[tuple[ast.Call, str, list[str]]]:
    """Every call in a module: (node, called name, enclosing class/function names)."""
    out: list[tuple[ast.Call, str, list[str]]] = []

    def visit(node: ast.AST, scope: list[str]) -> None:
        for child in ast.iter_child_nodes(node):
            inner = scope
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                inner = [*scope, child.name]
            if isinstance(child, ast.Call):
                f = child.func
                name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
                out.append((child, name, inner))
            visit(child, inner)

    visit(ast.parse(path.read_text(), str(path)), [])
    return out


def test_openflow_messages_are_built_only_in_the_builder_module():
    found = [f"{p.relative_to(APP.parent)}:{c.lineno} {name}(" for p in sorted(APP.rglob("*.py")) if p != BUILDER
             for c, name, _scope in _calls(p) if OFP_CLASS.match(name) or name == "caps_request"]
    assert not found, "OpenFlow built outside app/controller/ofmsg.py: " + ", ".join(found)


#: os-ken's own keep-alive loop, replaced in place (app/controller/compat.py): its echoes never went through
#: the southbound (the connection's liveness, not the apps' work; read-only, so no gate would stop them)
KEEPALIVE = (APP / "controller" / "compat.py", ["patch_idle_keepalive", "_echo_request_loop"])


def test_send_msg_is_called_only_by_the_one_send_function():
    found = [f"{p.relative_to(APP.parent)}:{c.lineno} in {'.'.join(scope) or '<module>'}"
             for p in sorted(APP.rglob("*.py")) for c, name, scope in _calls(p)
             if name == "send_msg" and not (p == SOUTHBOUND and scope == ["OpenFlowSouthbound", "send"])
             and (p, scope) != KEEPALIVE]
    assert not found, "send_msg outside OpenFlowSouthbound.send: " + ", ".join(found)


def test_the_checks_see_what_they_look_for():
    """The walkers find the builder's constructors and the send function's one send_msg."""
    assert any(OFP_CLASS.match(name) for _c, name, _s in _calls(BUILDER))
    assert [s for _c, name, s in _calls(SOUTHBOUND) if name == "send_msg"] == [["OpenFlowSouthbound", "send"]]
