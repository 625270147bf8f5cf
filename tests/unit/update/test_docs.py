"""docs/updates.md's Fig. 2 example is what the planner builds (so the doc cannot go stale)."""
from __future__ import annotations

import json
import re
from pathlib import Path

from app.update import planner
from app.update.plan import Plan
from tests.lib.fake_network import fig2_move

DOC = Path(__file__).resolve().parents[3] / "docs" / "updates.md"


def test_the_documented_fig2_plan_is_the_planners():
    blocks = [json.loads(b) for b in re.findall(r"```json\n(.*?)```", DOC.read_text(), re.S)]
    header, steps = blocks
    sc = fig2_move()
    plan = planner.move(sc.old_xcons, sc.old_rules, sc.new_xcons, sc.new_ports, sc.new_links, sc.new_rules,
                        sc.ingress, plan_id="fig2-move")
    real = plan.to_json()
    assert header == {k: real[k] for k in header}
    assert len(real["steps"]) == 17
    by_id = {s["id"]: s for s in real["steps"]}
    for s in steps:
        assert s == by_id[s["id"]]
    assert Plan.from_json(json.loads(json.dumps(real))) == plan
