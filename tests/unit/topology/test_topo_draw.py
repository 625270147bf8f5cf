"""Drawing: a real PNG of non-trivial size, and the terminal rendering."""
from __future__ import annotations

import struct
import zlib

from topology.draw import draw_png, format_graph
from topology.spec import fig2_testbed, optical_mesh, spec_to_graph


def fig2_with_circuit():
    g = spec_to_graph(fig2_testbed())
    for a, b in (("X:1", "X:2"), ("Y:1", "Y:2"), ("Y:3", "Y:4"), ("Z:1", "Z:2")):
        g.set_xcon_active(a, b)
    g.add_packet_link("A", 3, "B", 1, 10.0, source="lldp")
    g.add_packet_link("B", 2, "C", 1, 10.0, source="lldp")
    return g


def png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    length, ctype = struct.unpack(">I4s", data[8:16])
    assert ctype == b"IHDR" and length == 13
    crc = struct.unpack(">I", data[29:33])[0]
    assert zlib.crc32(data[12:29]) == crc
    assert data.rstrip(b"\x00").endswith(b"IEND\xaeB`\x82")
    return struct.unpack(">II", data[16:24])


def test_draw_fig2_png(tmp_path):
    out = draw_png(fig2_with_circuit(), tmp_path / "fig2.png", title="Fig. 2")
    data = out.read_bytes()
    w, h = png_size(data)
    assert w >= 600 and h >= 500
    assert len(data) > 30_000  # a drawing, not an empty canvas


def test_draw_larger_and_empty_graphs(tmp_path):
    big = draw_png(spec_to_graph(optical_mesh(20, 10, 3)), tmp_path / "mesh.png", show_potential=False)
    assert png_size(big.read_bytes())[0] >= 600
    from topology.graph import MultiLayerGraph

    empty = draw_png(MultiLayerGraph(), tmp_path / "empty.png")
    png_size(empty.read_bytes())


def test_format_graph_text():
    text = format_graph(fig2_with_circuit())
    assert text.startswith("Multi-layer graph: 3 packet switches, 3 OTS (16 virtual ports), 4 hosts, "
                           "2 packet links, 5 fibres, 4 active XCONs")
    assert "port 3   optical port X:1 (10 Mbit/s, spec); packet link to B:1 (10 Mbit/s, 0 ms, lldp)" in text
    assert "X:6      ODU0   1.25 Mbit/s    fibre to Z:6" in text
    assert "Y:1      ODU2   10 Mbit/s      fibre to X:2, XCON with Y:2" in text
    assert "h3     10.0.0.3        00:00:00:00:00:03 on C:3" in text
