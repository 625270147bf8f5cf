"""The os-ken OF1.0 ERROR work-around is applied by the launcher's patch step."""
from os_ken.ofproto import ofproto_v1_0

from app.controller.compat import patch_os_ken


def test_of10_has_experimenter_error_type_after_patch():
    patch_os_ken()
    assert ofproto_v1_0.OFPET_EXPERIMENTER == 0xFFFF
    assert ofproto_v1_0.OFPET_EXPERIMENTER not in (ofproto_v1_0.OFPET_HELLO_FAILED, ofproto_v1_0.OFPET_BAD_REQUEST,
                                                  ofproto_v1_0.OFPET_BAD_ACTION, ofproto_v1_0.OFPET_FLOW_MOD_FAILED,
                                                  ofproto_v1_0.OFPET_PORT_MOD_FAILED, ofproto_v1_0.OFPET_QUEUE_OP_FAILED)


def test_drain_burst_joins_what_is_queued_in_order_and_releases_each():
    from queue import Empty, Queue

    from app.controller.compat import drain_burst

    q: Queue = Queue()
    for part in (b"b", b"c", b"d"):
        q.put((part, False))
    released = []
    buf, close = drain_burst((b"a", False), lambda: q.get(block=False), lambda: released.append(1), Empty)
    assert (buf, close) == (b"abcd", False)
    assert len(released) == 3 and q.empty()


def test_drain_burst_stops_at_a_closing_message_and_at_the_limit():
    from queue import Empty, Queue

    from app.controller.compat import drain_burst

    q: Queue = Queue()
    for part, close in ((b"b", True), (b"c", False)):
        q.put((part, close))
    assert drain_burst((b"a", False), lambda: q.get(block=False), lambda: None, Empty) == (b"ab", True)
    assert q.qsize() == 1  # the message after the closing one stays queued
    assert drain_burst((b"x", True), lambda: q.get(block=False), lambda: None, Empty) == (b"x", True)
    assert q.qsize() == 1
    for i in range(5):
        q.put((bytes([65 + i]), False))
    buf, _ = drain_burst((b"0", False), lambda: q.get(block=False), lambda: None, Empty, limit=3)
    assert buf == b"0cA"  # three messages at most: the first, then two from the queue in order


def test_the_send_loop_is_patched_once_and_writes_a_burst_with_one_sendall():
    import os_ken.base.app_manager  # noqa: F401
    from os_ken.controller import controller as osc
    from os_ken.lib import hub

    patch_os_ken()
    patch_os_ken()  # idempotent
    assert getattr(osc.Datapath._send_loop, "mlte_coalescing", False)

    class Sock:
        def __init__(self):
            self.writes: list[bytes] = []

        def sendall(self, buf):
            self.writes.append(buf)

        def shutdown(self, how):
            pass

    dp = object.__new__(osc.Datapath)
    dp.socket, dp.address, dp.state = Sock(), ("test", 0), None
    dp.send_q = hub.Queue(16)
    dp._send_q_sem = hub.BoundedSemaphore(16)
    for part, close in ((b"m1", False), (b"m2", False), (b"bye", True)):
        dp._send_q_sem.acquire()
        dp.send_q.put((part, close))
    dp._send_loop()
    assert dp.socket.writes == [b"m1m2bye"]
    assert dp.send_q is None


def test_split_messages_finds_whole_messages_and_where_the_incomplete_one_starts():
    import struct

    from app.controller.compat import split_messages

    def m(t: int, body: bytes, xid: int) -> bytes:
        return struct.pack("!BBHI", 4, t, 8 + len(body), xid) + body

    data = bytearray(m(2, b"abc", 1) + m(21, b"", 2) + m(10, b"0123456789", 3))
    found, used = split_messages(data[:-4])  # the third cut short
    assert [(o, t, n, x) for o, _v, t, n, x in found] == [(0, 2, 11, 1), (11, 21, 8, 2)] and used == 19
    assert split_messages(data)[1] == len(data)
    assert split_messages(bytearray(data[:5])) == ([], 0)  # not even a header
    bad = bytearray(struct.pack("!BBHI", 4, 2, 3, 9))  # a length below the header's: read as the header
    assert split_messages(bad) == ([(0, 4, 2, 8, 9)], 8)


def test_the_receive_loop_reads_by_the_chunk_and_dispatches_every_message_in_order():
    """Messages cut anywhere across reads come out whole, in order, each dispatched once; the loop ends at
    the end of the stream and closes the socket (os-ken's _deactivate)."""
    from os_ken.controller import controller as osc
    from os_ken.controller.handler import MAIN_DISPATCHER
    from os_ken.ofproto import ofproto_v1_3_parser as p13
    from os_ken.ofproto.ofproto_protocol import ProtocolDesc

    from app.controller.compat import RECV_CHUNK, patch_os_ken

    patch_os_ken()
    assert getattr(osc.Datapath._recv_loop, "mlte_batching", False)
    desc = ProtocolDesc(version=4)
    wire = b""
    for i, msg in enumerate([p13.OFPEchoRequest(desc, data=b"ping"), p13.OFPBarrierReply(desc),
                             p13.OFPEchoReply(desc, data=b"x" * 3000)]):
        msg.set_xid(100 + i)
        msg.serialize()
        wire += bytes(msg.buf)
    cuts = [0, 3, 9, 30, 31, len(wire)]
    reads = [wire[a:b] for a, b in zip(cuts[:-1], cuts[1:], strict=True)] + [b""]

    class Sock:
        asked: list[int] = []
        closed = False

        def recv(self, n: int) -> bytes:
            self.asked.append(n)
            return reads.pop(0)

        def close(self) -> None:
            self.closed = True

    seen: list[tuple[str, int]] = []

    class Brick:
        def send_event_to_observers(self, ev, state):  # noqa: ANN001
            seen.append((type(ev.msg).__name__, ev.msg.xid))

        def get_handlers(self, ev):  # noqa: ANN001
            return []

    dp = osc.Datapath.__new__(osc.Datapath)
    dp.socket, dp.ofp_brick, dp.state = Sock(), Brick(), MAIN_DISPATCHER
    dp.set_version(4)
    dp._recv_loop()
    assert seen == [("OFPEchoRequest", 100), ("OFPBarrierReply", 101), ("OFPEchoReply", 102)]
    assert set(Sock.asked) == {RECV_CHUNK} and dp.socket.closed


def test_keepalive_echoes_go_only_to_a_quiet_switch_and_a_silent_one_is_still_dropped(monkeypatch):
    """A switch that sent something since the last tick gets no echo; one that goes silent gets an echo
    every tick and is closed after max_unreplied + 1 of them, as with os-ken's own loop."""
    from os_ken.controller import controller as osc
    from os_ken.ofproto import ofproto_v1_3, ofproto_v1_3_parser

    from app.controller.compat import keepalive_echo_due, patch_os_ken

    assert keepalive_echo_due(5, 4, 0) is False and keepalive_echo_due(5, 5, 0) is True
    assert keepalive_echo_due(6, 5, 1) is True  # an echo outstanding: counted down whatever else came
    patch_os_ken()
    assert getattr(osc.Datapath._echo_request_loop, "mlte_idle", False)

    class Dp:
        ofproto, ofproto_parser = ofproto_v1_3, ofproto_v1_3_parser
        max_unreplied_echo_requests, echo_request_interval = 3, 2.0

        def __init__(self):
            self.send_q, self.unreplied_echo_requests, self.sent, self.closed = [1], [], [], False
            self.mlte_reads, self.xid = 0, 0

        def set_xid(self, msg):
            self.xid += 1
            return self.xid

        def send_msg(self, msg):
            self.sent.append(msg)

        def close(self):
            self.closed = True

    dp = Dp()
    ticks = []

    def tick(seconds):  # the switch's life between two ticks
        ticks.append(seconds)
        n = len(ticks)
        if n <= 5 and dp.unreplied_echo_requests:  # alive: it answers the echo (the reply is read)
            dp.unreplied_echo_requests.clear()
            dp.mlte_reads += 1
        if n <= 3:
            dp.mlte_reads += 1  # busy: port stats every Ts; tick 4 quiet; silent from tick 6 on
        if n > 20:
            raise AssertionError("never dropped")

    monkeypatch.setattr(osc.hub, "sleep", tick)
    osc.Datapath._echo_request_loop(dp)
    # ticks 1-4 skip (it had just connected, then busy), 5 sends (quiet before it), 6 skips (the reply
    # came), 7-10 send and stay unanswered: closed before an 11th
    assert (len(dp.sent), dp.closed, len(ticks)) == (1 + 4, True, 10)
    assert all(isinstance(m, ofproto_v1_3_parser.OFPEchoRequest) for m in dp.sent)
