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
