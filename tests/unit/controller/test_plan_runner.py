"""The plan runner (app/controller/plan_runner.py) over the fake network: ports reserved before the first
step and given back, the plan log, the journal, the events, the roll-back; and it is the executor's only
caller in app/."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

from app.controller.journal import JOURNAL
from app.controller.network_view import NetworkView
from app.controller.plan_log import PlanLog
from app.controller.plan_runner import PLAN, PlanRunner
from app.controller.view_changes import ReservedPortsChanged
from app.update import planner
from app.update.executor import DONE, ROLLED_BACK, threaded
from app.update.model import XconSpec
from tests.lib.fake_network import FakeNetwork
from topology.spec import fig2_testbed, spec_to_graph

ROOT = Path(__file__).resolve().parents[3]
BYPASS = [XconSpec("X", 1, 2), XconSpec("Y", 1, 4), XconSpec("Z", 1, 2)]  # lights A:3 - C:1
ENDS = {("A", 3), ("C", 1)}
RESERVED = "reserved (the view's announcement)"


class Book(NetworkView):
    """The network view's port reservations, over the Fig. 2 graph (its adaptations)."""

    def graph(self, sources=()):  # noqa: ANN001, ANN201
        return spec_to_graph(fig2_testbed()), []


@pytest.fixture
def net():
    n = FakeNetwork.from_spec(fig2_testbed(), xcon_delay_s=0.01)
    yield n
    n.close()


@pytest.fixture
def runner(net):
    news: list[tuple[str, dict]] = []
    book = Book()
    # the view announces reserved-port changes itself: recorded in the same list as the runner's news
    book.subscribe(lambda change: news.append((RESERVED, {})) if isinstance(change, ReservedPortsChanged) else None)
    r = PlanRunner(net, book, notify=lambda kind, data: news.append((kind, data)), run_parallel=threaded,
                   log=PlanLog())
    r.news = news  # type: ignore[attr-defined]
    return r


def lit() -> object:
    return planner.provision(BYPASS, [], [(("A", 3), ("C", 1))], [], [], verify=False, stable_ms=5)


def dark() -> object:
    return planner.release(BYPASS, [], [], drain=False)


def test_ports_are_reserved_before_the_first_step_and_kept_when_done(net, runner):
    seen: list[set] = []
    net.observe(lambda _net, _change: seen.append(runner.ports.reserved_ports))
    since = JOURNAL.since()[-1]["seq"] if JOURNAL.since() else 0
    rec = runner.run(lit(), "te:1", "te", context={"offload": 1})
    assert rec.state == DONE, rec.error
    assert seen and seen[0] == ENDS  # already reserved when the first XCON was applied
    assert runner.ports.reservations_of("te:") == {"te:1": frozenset(ENDS)}
    kinds = [k for k, _ in runner.news]
    assert kinds[0] == RESERVED and kinds.count(RESERVED) == 1
    plan_news = [d for k, d in runner.news if k == PLAN]
    assert plan_news[0]["event"] == "plan_started" and plan_news[-1]["event"] == "plan_done"
    assert all(d["offload"] == 1 for d in plan_news)
    (logged,) = runner.log.items()
    assert logged["source"] == "te" and logged["offload"] == 1 and logged["state"] == DONE
    journal = JOURNAL.since(since, "plan")
    assert [e["event"] for e in journal][-1] == "plan_done" and all(e["offload"] == 1 for e in journal)


def test_a_failed_step_rolls_back_and_gives_the_ports_back(net, runner):
    net.refuse_xcon("Z")
    rec = runner.run(lit(), "reservation:5", "reservations", context={"reservation_id": 5})
    assert rec.state == ROLLED_BACK and rec.failed_step.startswith("xcon+Z")
    assert net.all_xcons() == set() and runner.ports.reserved_ports == set()
    assert [k for k, _ in runner.news].count(RESERVED) == 2  # reserved, then given back
    (logged,) = runner.log.items(reservation_id=5)
    assert logged["state"] == ROLLED_BACK and {s["kind"] for s in logged["rollback"]} == {"xcon_remove"}


def test_a_release_plan_gives_its_owners_ports_back_once_done(net, runner):
    assert runner.run(lit(), "grow:L", "te").state == DONE
    rec = runner.run(dark(), "grow:L", "te", releases=True)
    assert rec.state == DONE and net.all_xcons() == set() and runner.ports.reserved_ports == set()


def test_a_plan_removing_the_xcons_of_an_api_circuit_frees_its_ports(net, runner):
    """POST /plan circuits have no owner that lives on: a later plan taking their XCONs down frees them."""
    assert runner.run(lit(), "plan:p1", "api").state == DONE
    assert runner.ports.reserved_ports == ENDS
    runner.reserve("reservation:9", [("B", 1)])  # not a POST /plan circuit: stays
    assert runner.run(dark(), "plan:p2", "api").state == DONE
    assert runner.ports.reservations_of("") == {"reservation:9": frozenset({("B", 1)})}


def test_explicit_ports_and_no_ports(net, runner):
    rec = runner.run(lit(), "mapping:1", "mapping", ports=())
    assert rec.state == DONE and runner.ports.reserved_ports == set() and RESERVED not in dict(runner.news)


def test_a_bare_runner_is_bound_once():
    r = PlanRunner()
    assert not r.bound
    with pytest.raises(RuntimeError):
        r.run(lit(), "plan:x", "api")
    first, second = NetworkView(), NetworkView()
    r.bind(object(), first, lambda k, d: None, run_parallel=threaded, sleep=lambda s: None, poll_s=0.01)
    r.bind(object(), second, lambda k, d: None, run_parallel=threaded, sleep=lambda s: None, poll_s=0.01)
    assert r.bound and r.ports is first and r.poll_s == 0.01


def _executor_calls(path: Path) -> list[int]:
    """Lines of ``path`` that call :func:`app.update.executor.execute` (imported by name or via its module)."""
    tree = ast.parse(path.read_text(), str(path))
    names: set[str] = set()  # local names bound to execute
    modules: set[str] = set()  # local names bound to the executor module (or app.update, which re-exports it)
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module in ("app.update.executor", "app.update"):
            names |= {a.asname or a.name for a in node.names if a.name == "execute"}
            if node.module == "app.update":
                modules |= {a.asname or a.name for a in node.names if a.name == "executor"}
        elif isinstance(node, ast.Import):
            modules |= {a.asname or a.name for a in node.names if a.name in ("app.update.executor", "app.update")}
    lines = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        f = node.func
        if isinstance(f, ast.Name) and f.id in names:
            lines.append(node.lineno)
        elif isinstance(f, ast.Attribute) and f.attr == "execute" and ast.unparse(f.value) in (
                modules | {"app.update.executor", "app.update"}):
            lines.append(node.lineno)
    return lines


def test_only_the_runner_calls_the_executor():
    """One place runs plans (issue 22 item 4): every plan goes through PlanRunner.run."""
    callers = {str(p.relative_to(ROOT)): lines for p in sorted((ROOT / "app").rglob("*.py"))
               if (lines := _executor_calls(p))}
    assert callers.keys() == {"app/controller/plan_runner.py"}, callers
    assert "execute(" in (ROOT / "app/controller/plan_runner.py").read_text()
    probe = ROOT / "app/update/executor.py"
    assert _executor_calls(probe) == []  # the definition is no call
