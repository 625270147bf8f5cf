"""The static vendor file: schema checks with precise errors, YAML/JSON, equality with the spec."""
from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from topology.compare import graph_diff, without_hosts
from topology.errors import VendorFileError
from topology.spec import fig2_testbed, optical_mesh, spec_to_graph, spec_to_vendor_file
from topology.vendor_file import (
    load_vendor_graph,
    parse_vendor_document,
    read_vendor_file,
    vendor_to_graph,
    write_vendor_file,
)

EXAMPLE = Path(__file__).resolve().parents[3] / "mininet_labs" / "data" / "fig2-optical.yaml"


def fig2_doc() -> dict:
    return copy.deepcopy(spec_to_vendor_file(fig2_testbed()))


def test_example_file_is_the_fig2_spec():
    assert read_vendor_file(EXAMPLE) == parse_vendor_document(fig2_doc())
    g = load_vendor_graph(EXAMPLE)
    assert graph_diff(g, without_hosts(spec_to_graph(fig2_testbed()))) == []
    assert {d["source"] for _, _, d in g.g.edges(data=True)} == {"static"}


@pytest.mark.parametrize("suffix", [".json", ".yaml", ".yml"])
def test_write_read_round_trip(tmp_path, suffix):
    doc = spec_to_vendor_file(optical_mesh(6, 4, 2, seed=1))
    path = tmp_path / f"optical{suffix}"
    write_vendor_file(doc, path)
    if suffix == ".json":
        json.loads(path.read_text())  # really JSON (port keys become strings, still accepted)
    assert read_vendor_file(path) == parse_vendor_document(doc)
    assert vendor_to_graph(doc) == load_vendor_graph(path)


def test_optional_sections_and_defaults():
    doc = {"version": 1, "ots": [{"name": "X", "dpid": "0x0f01", "ports": {"1": "odu2", 2: "ODU2"}}]}
    out = parse_vendor_document(doc)
    assert out["unit_mbps"] == 1.0 and out["fibres"] == [] and out["adaptations"] == []
    assert out["ots"][0] == {"name": "X", "dpid": 0xF01, "setup_time": 0.185, "ports": {1: "ODU2", 2: "ODU2"}}
    g = vendor_to_graph(doc)
    assert g.edges_of_kind("xcon") == ["xcon:X:1-X:2"]


def _error(doc, file="f.yaml") -> VendorFileError:
    with pytest.raises(VendorFileError) as info:
        parse_vendor_document(doc, file)
    assert info.value.user_error is True
    return info.value


@pytest.mark.parametrize("mutate, path, reason", [
    (lambda d: d.pop("version"), "<top>", "missing required key 'version'"),
    (lambda d: d.update(version=2), "version", "unsupported schema version 2"),
    (lambda d: d.update(colour="red"), "colour", "unknown key"),
    (lambda d: d.update(unit_mbps=-1), "unit_mbps", "must be a number > 0"),
    (lambda d: d.update(ots=[]), "ots", "at least one OTS"),
    (lambda d: d.update(fibres={}), "fibres", "must be a list"),
    (lambda d: d["ots"][1].update(ports={1: "ODU2", 2: "ODU9"}), "ots[1].ports.2", "unknown granularity 'ODU9'"),
    (lambda d: d["ots"][0].update(ports={0: "ODU2"}), "ots[0].ports.0", "positive integer"),
    (lambda d: d["ots"][0].update(dpid="zz"), "ots[0].dpid", "not an integer or hex string"),
    (lambda d: d["ots"][2].pop("ports"), "ots[2]", "missing required key 'ports'"),
    (lambda d: d["ots"][0].update(speed=1), "ots[0].speed", "unknown key"),
    (lambda d: d["ots"][1].update(dpid=0xF01), "ots[1]", "dpid 0xf01 is already used by node 'X'"),
    (lambda d: d["fibres"][2].update(b="Z5"), "fibres[2].b", "must be '<ots>:<port>'"),
    (lambda d: d["fibres"][0].update(b="Q:1"), "fibres[0].b", "unknown OTS 'Q'"),
    (lambda d: d["fibres"][0].update(b="Y:9"), "fibres[0].b", "OTS Y has no port 9"),
    (lambda d: d["fibres"][4].update(b="Z:5"), "fibres[4]", "different granularity"),
    (lambda d: d["fibres"][1].update(a="X:2"), "fibres[1]", "already used by optical:X:2-Y:1"),
    (lambda d: d["fibres"][0].update(mbps=0), "fibres[0].mbps", "must be a number > 0"),
    (lambda d: d["adaptations"][0].update(switch="Q"), "adaptations[0].switch", "unknown packet switch 'Q'"),
    (lambda d: d["adaptations"][1].update(port=3), "adaptations[1]", "already used by adaptation:A:3-X:1"),
    (lambda d: d["adaptations"][0].update(oport="X:2"), "adaptations[0]", "already used by optical:X:2-Y:1"),
    (lambda d: d["packet_switches"][0].update(name="A:1"), "packet_switches[0].name", "without ':'"),
])
def test_schema_errors_name_file_path_and_reason(mutate, path, reason):
    doc = fig2_doc()
    mutate(doc)
    err = _error(doc)
    assert err.file == "f.yaml"
    assert err.path == path
    assert reason in err.reason
    assert str(err).startswith(f"f.yaml: {path}: ")


def test_not_a_mapping():
    err = _error([1, 2])
    assert "must be a mapping" in err.reason


def test_file_level_errors(tmp_path):
    with pytest.raises(VendorFileError, match="file not found"):
        read_vendor_file(tmp_path / "missing.yaml")
    bad_yaml = tmp_path / "bad.yaml"
    bad_yaml.write_text("version: 1\nots: [\n  - {name: X\n")
    with pytest.raises(VendorFileError, match=r"bad.yaml: line \d+ column \d+: invalid YAML") as info:
        read_vendor_file(bad_yaml)
    assert info.value.path.startswith("line ")
    bad_json = tmp_path / "bad.json"
    bad_json.write_text('{"version": 1,\n "ots": [}')
    with pytest.raises(VendorFileError, match=r"bad.json: line 2 column \d+: invalid JSON"):
        read_vendor_file(bad_json)
    wrong = tmp_path / "wrong.yaml"
    wrong.write_text("version: 1\nots:\n  - {name: X, dpid: 1, ports: {1: ODU3, 2: ODU2}}\nfibres: [{a: 'X:1', b: 'X:2'}]\n")
    with pytest.raises(VendorFileError, match=r"wrong.yaml: fibres\[0\]: fibre X:1-X:2 joins two ports of one OTS"):
        read_vendor_file(wrong)


@pytest.mark.parametrize("name", ["latin1.yaml", "utf16.json"])
def test_a_file_that_is_not_utf8_is_a_vendor_file_error(tmp_path, name):
    """Issue 14 item 8: a Latin-1 or UTF-16 file gave a UnicodeDecodeError traceback."""
    f = tmp_path / name
    f.write_bytes("version: 1\nots: [{name: Caf\u00e9}]\n".encode("latin-1") if name.endswith(".yaml")
                  else '{"version": 1}'.encode("utf-16"))
    line = "line 2 column 17" if name.endswith(".yaml") else "line 1 column 1"
    with pytest.raises(VendorFileError, match=rf"{name}: {line}: not UTF-8 text \(byte 0x[0-9a-f]{{2}}\)"):
        read_vendor_file(f)


def test_check_vendor_file_cli_on_a_non_utf8_file(tmp_path, capsys):
    from app.cli.main import main

    f = tmp_path / "v.json"
    f.write_bytes(b"\xff\xfe{")
    assert main(["topology", "check-vendor-file", str(f)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("mlte: error: ") and "not UTF-8" in err and len(err.strip().splitlines()) == 1
