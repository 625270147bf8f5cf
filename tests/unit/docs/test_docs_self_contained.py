"""The docs stand alone: a clone has no machine notes or seed papers, so the docs never point there,
every doc they link to exists, and each paper they build on is cited in full in docs/references.md."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
DOCS = sorted([ROOT / "README.md", *(ROOT / "docs").glob("*.md")])
OUTSIDE = re.compile(r"\.\./shared|shared/seeds|shared/notes|notes/(environment|otter-lp|style|anchors)\.md|/work/")
LINK = re.compile(r"\bdocs/([\w.-]+\.md)")


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_no_doc_points_outside_the_repository(doc: Path) -> None:
    bad = [f"{doc.name}:{i}: {line.strip()}" for i, line in enumerate(doc.read_text().splitlines(), 1)
           if OUTSIDE.search(line)]
    assert bad == []


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_every_linked_doc_exists(doc: Path) -> None:
    missing = sorted({m for m in LINK.findall(doc.read_text()) if not (ROOT / "docs" / m).exists()})
    assert missing == []


def test_every_paper_is_cited_with_authors_and_venue() -> None:
    refs = (ROOT / "docs" / "references.md").read_text()
    for title, author, venue in (
        ("Traffic Optimization in Multi-Layered WANs using SDN", "Rodrigues", "HOTI"),
        ("Efficient Multi-WAN Transport for 5G with OTTER", "Hogan", "NSDI"),
        ("Path Persistence in the Cloud", "Reda", "Computer Communication Review"),
        ("CRONets: Cloud-Routed Overlay Networks", "Cai", "ICDCS"),
        ("Bandwidth Aggregation over Multihoming Links", "Sterca", "Babeș-Bolyai"),
    ):
        line = next((row for row in refs.splitlines() if title in row), "")
        assert author in line and venue in line, title


def test_contracts_is_a_reference_not_a_planning_note() -> None:
    text = (ROOT / "docs" / "contracts.md").read_text()
    for phrase in ("owner:", "tell the coordinator", "Written before the parts exist", "Note ("):
        assert phrase not in text
