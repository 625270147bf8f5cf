"""The agent's TLS client (``ssl:HOST:PORT``): it verifies the controller's certificate against its CA,
presents its own, and a controller whose certificate another CA signed is refused with one clear log
line and retried with the backoff. The controller here is Python's ssl server on 127.0.0.1 with a CA
and certificates made by the test (the ``cryptography`` package); no OVS."""
from __future__ import annotations

import datetime
import ipaddress
import logging
import select
import socket
import ssl
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from os_ken.ofproto import ofproto_v1_0 as ofp

from ots_virtual import of10
from ots_virtual.__main__ import main
from ots_virtual.agent import OtsAgent
from ots_virtual.upstream import Target, TlsFiles, UpstreamConfigError, connect, parse_targets

PORTS = {1: "ODU2", 2: "ODU2"}


# --- a small PKI ----------------------------------------------------------------------------------

def _name(cn: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])


class Ca:
    """A self-signed CA that signs leaf certificates into ``directory`` (``NAME-cert.pem``/``NAME-key.pem``)."""

    def __init__(self, directory: Path, cn: str) -> None:
        self.dir = directory
        self.dir.mkdir(parents=True, exist_ok=True)
        self.key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.timezone.utc)
        self.cert = (x509.CertificateBuilder().subject_name(_name(cn)).issuer_name(_name(cn))
                     .public_key(self.key.public_key()).serial_number(x509.random_serial_number())
                     .not_valid_before(now - datetime.timedelta(minutes=5))
                     .not_valid_after(now + datetime.timedelta(days=1))
                     .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
                     .add_extension(x509.KeyUsage(False, False, False, False, False, True, True, False, False),
                                    critical=True)
                     .add_extension(x509.SubjectKeyIdentifier.from_public_key(self.key.public_key()), critical=False)
                     .sign(self.key, hashes.SHA256()))
        (self.dir / "ca-cert.pem").write_bytes(self.cert.public_bytes(serialization.Encoding.PEM))

    @property
    def ca_file(self) -> str:
        return str(self.dir / "ca-cert.pem")

    def issue(self, name: str, server: bool) -> tuple[str, str]:
        key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.timezone.utc)
        usage = ExtendedKeyUsageOID.SERVER_AUTH if server else ExtendedKeyUsageOID.CLIENT_AUTH
        cert = (x509.CertificateBuilder().subject_name(_name(name)).issuer_name(self.cert.subject)
                .public_key(key.public_key()).serial_number(x509.random_serial_number())
                .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=1))
                .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
                .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
                .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost"),
                                                            x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                               critical=False)
                .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(self.key.public_key()),
                               critical=False)
                .sign(self.key, hashes.SHA256()))
        cert_path, key_path = self.dir / f"{name}-cert.pem", self.dir / f"{name}-key.pem"
        cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                               serialization.NoEncryption()))
        key_path.chmod(0o600)
        return str(cert_path), str(key_path)


@pytest.fixture(scope="module")
def pki(tmp_path_factory) -> dict[str, Ca]:
    """``good``: the CA of the deployment (controller and switch certificates); ``rogue``: another CA."""
    base = tmp_path_factory.mktemp("pki")
    good, rogue = Ca(base / "good", "mlte test CA"), Ca(base / "rogue", "someone else's CA")
    for ca in (good, rogue):
        ca.issue("controller", server=True)
        ca.issue("switch", server=False)
    return {"good": good, "rogue": rogue}


# --- a TLS controller -------------------------------------------------------------------------------

class TlsController:
    """An OF1.0 controller behind TLS that requires a client certificate from ``client_ca``: on each
    session it handshakes, sends HELLO and FEATURES_REQUEST, and records the switch's dpid."""

    def __init__(self, cert: str, key: str, client_ca: str) -> None:
        self.ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.ctx.load_cert_chain(cert, key)
        self.ctx.load_verify_locations(cafile=client_ca)
        self.ctx.verify_mode = ssl.CERT_REQUIRED
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.accepts = 0
        self.failures: list[str] = []  # server-side handshake errors
        self.clients: list[str] = []  # the CN of each verified client certificate
        self.dpids: list[int] = []
        self.cond = threading.Condition()
        self._closed = False
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    @property
    def target(self) -> Target:
        return Target("127.0.0.1", self.port, tls=True)

    def _run(self) -> None:
        while not self._closed:
            try:
                raw, _ = self.listener.accept()
            except OSError:
                return
            with self.cond:
                self.accepts += 1
                self.cond.notify_all()
            raw.settimeout(5)
            try:
                with self.ctx.wrap_socket(raw, server_side=True) as tls:
                    cn = dict(x[0] for x in tls.getpeercert()["subject"])["commonName"]
                    with self.cond:
                        self.clients.append(cn)
                    tls.sendall(of10.hello(1) + of10.message(ofp.OFPT_FEATURES_REQUEST, 2))
                    self._serve(tls)
            except (ssl.SSLError, OSError) as exc:
                with self.cond:
                    self.failures.append(str(exc))
                    self.cond.notify_all()
                raw.close()

    def _serve(self, tls: ssl.SSLSocket) -> None:
        reader = of10.MessageReader()
        tls.settimeout(0.2)
        while not self._closed:
            try:
                data = tls.recv(65536)
            except TimeoutError:
                continue
            if not data:
                return
            for msg in reader.feed(data):
                h = of10.parse_header(msg)
                if h.msg_type == ofp.OFPT_FEATURES_REPLY:
                    with self.cond:
                        self.dpids.append(of10.parse(msg).datapath_id)
                        self.cond.notify_all()
                elif h.msg_type == ofp.OFPT_ECHO_REQUEST:
                    tls.sendall(of10.echo_reply(h.xid, msg[8:]))

    def wait(self, pred, timeout: float = 15.0) -> None:
        with self.cond:
            assert self.cond.wait_for(pred, timeout), "the TLS controller did not see that happen"

    def close(self) -> None:
        self._closed = True
        try:
            self.listener.shutdown(socket.SHUT_RDWR)  # wakes the accept() (close alone does not, on Linux)
        except OSError:
            pass
        self.listener.close()
        self._thread.join(timeout=5)


@pytest.fixture
def controllers() -> Iterator[list[TlsController]]:
    made: list[TlsController] = []
    yield made
    for c in made:
        c.close()


@pytest.fixture
def agents() -> Iterator[list[OtsAgent]]:
    made: list[OtsAgent] = []
    yield made
    for a in made:
        a.stop()


def start(agents, target: Target, files: TlsFiles, dpid: int = 0x0F31) -> OtsAgent:
    a = OtsAgent("ut-tls", dpid, PORTS, [target], delay_min=0, delay_max=0, claim=False, ovs_wait=0,
                 tls=files.context())
    a.start()
    agents.append(a)
    return a


def test_the_agent_handshakes_and_speaks_openflow_over_tls(pki, controllers, agents):
    good = pki["good"]
    ctl = TlsController(*good.issue("controller", server=True), client_ca=good.ca_file)
    controllers.append(ctl)
    start(agents, ctl.target, TlsFiles.from_dir(str(good.dir)))
    ctl.wait(lambda: ctl.dpids == [0x0F31])
    assert ctl.clients == ["switch"]  # the agent presented its certificate, and the controller verified it
    assert ctl.failures == []


def test_a_controller_certificate_from_another_ca_is_refused_and_retried(pki, controllers, agents, caplog):
    good, rogue = pki["good"], pki["rogue"]
    ctl = TlsController(*rogue.issue("controller", server=True), client_ca=good.ca_file)
    controllers.append(ctl)
    with caplog.at_level(logging.INFO, logger="ots_virtual.agent"):
        start(agents, ctl.target, TlsFiles.from_dir(str(good.dir)))
        ctl.wait(lambda: ctl.accepts >= 3)  # retried, with the backoff (0.25 s, 0.5 s...)
    assert ctl.dpids == [] and ctl.clients == []  # no OpenFlow session ever started
    lines = [r for r in caplog.records if "unreachable" in r.getMessage()]
    assert len(lines) >= 2
    first = lines[0]
    assert first.levelno == logging.WARNING and "\n" not in first.getMessage()
    assert "certificate of controller ssl:127.0.0.1" in first.getMessage()
    assert "signed by the CA given to the agent" in first.getMessage()
    assert all(r.levelno == logging.INFO for r in lines[1:])  # the same reason again: not another warning


def test_an_agent_certificate_from_another_ca_is_refused_by_the_controller(pki, controllers, agents, caplog):
    """The controller's side of the same rule: the agent presents its certificate, a foreign one fails."""
    good, rogue = pki["good"], pki["rogue"]
    ctl = TlsController(*good.issue("controller", server=True), client_ca=good.ca_file)
    controllers.append(ctl)
    rogue_switch = rogue.issue("switch", server=False)
    with caplog.at_level(logging.INFO, logger="ots_virtual.agent"):
        start(agents, ctl.target, TlsFiles(good.ca_file, *rogue_switch))
        ctl.wait(lambda: len(ctl.failures) >= 2)  # refused, and the agent tried again
    assert ctl.clients == [] and ctl.dpids == []
    assert any("certificate" in f.lower() for f in ctl.failures)
    # the alert, or (when the controller's close overtakes it) a reset before the first message
    assert any("refuse" in r.getMessage() and "the agent's certificate" in r.getMessage()
               for r in caplog.records if r.levelno == logging.WARNING)


def test_one_tls_and_one_plain_controller(pki, controllers, agents):
    from tests.lib.of10_client import Of10Controller

    good = pki["good"]
    tls_ctl = TlsController(*good.issue("controller", server=True), client_ca=good.ca_file)
    controllers.append(tls_ctl)
    plain = Of10Controller()
    try:
        a = OtsAgent("ut-tls2", 0x0F32, PORTS, [tls_ctl.target, plain.address], delay_min=0, delay_max=0,
                     claim=False, ovs_wait=0, tls=TlsFiles.from_dir(str(good.dir)).context())
        a.start()
        agents.append(a)
        tls_ctl.wait(lambda: tls_ctl.dpids == [0x0F32])
        plain.wait_connected()
        assert plain.features().datapath_id == 0x0F32
    finally:
        plain.close()


def test_a_tls_channel_is_read_and_written_from_several_threads(pki):
    """The agent's pattern over TLS: one thread reads while several write whole messages (an SSL
    object must never be used by two threads at once); an echo server sends everything back."""
    good = pki["good"]
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(*good.issue("controller", server=True))
    listener = socket.create_server(("127.0.0.1", 0))

    def echo() -> None:
        raw, _ = listener.accept()
        with ctx.wrap_socket(raw, server_side=True) as tls:
            tls.settimeout(10)
            while data := tls.recv(65536):
                tls.sendall(data)

    server = threading.Thread(target=echo, daemon=True)
    server.start()
    chan = connect(Target("127.0.0.1", listener.getsockname()[1], tls=True), TlsFiles.from_dir(str(good.dir)).context())
    writers, per_writer = 4, 200
    threads = [threading.Thread(target=lambda n=n: [chan.send(of10.message(4, n << 16 | i, bytes([n]) * 500), 10)
                                                    for i in range(per_writer)]) for n in range(writers)]
    for t in threads:
        t.start()
    frames = of10.MessageReader()
    msgs: list[bytes] = []
    deadline = time.monotonic() + 20
    while len(msgs) < 1 + writers * per_writer and time.monotonic() < deadline:  # + our HELLO, echoed
        if not chan.pending():
            select.select([chan], [], [], 0.1)
        data = chan.recv()
        if data:
            msgs.extend(frames.feed(data))
    for t in threads:
        t.join(timeout=10)
    chan.close()
    listener.close()
    assert len(msgs) == 1 + writers * per_writer
    by_writer: dict[int, list[int]] = {}
    for m in msgs:
        if m[1] == 4:
            xid = int.from_bytes(m[4:8], "big")
            by_writer.setdefault(xid >> 16, []).append(xid & 0xFFFF)
            assert m[8:] == bytes([xid >> 16]) * 500
    assert by_writer == {n: list(range(per_writer)) for n in range(writers)}


def test_tls_options_are_checked(pki, tmp_path, capsys):
    good = pki["good"]
    base = ["--bridge", "no-such-br", "--dpid", "1", "--ports", "1:ODU2"]
    cases = [
        (["--controller", "ssl:127.0.0.1:6653"], "needs TLS files"),
        (["--controller", "127.0.0.1:6653", "--tls", str(good.dir)], "no ssl:HOST:PORT controller"),
        (["--controller", "ssl:127.0.0.1:6653", "--tls", str(tmp_path)], "not found"),
        (["--controller", "ssl:127.0.0.1:6653", "--ssl-ca", good.ca_file], "--ssl-cert, --ssl-key missing"),
        (["--controller", "ssl:127.0.0.1:6653", "--tls", str(good.dir), "--ssl-key", good.ca_file],
         "TLS certificate"),
    ]
    for extra, words in cases:
        assert main(base + extra) == 2, extra
        err = capsys.readouterr().err
        assert words in err and "Traceback" not in err and err.count("\n") == 1, err


def test_controller_lists():
    assert parse_targets(["10.0.0.1:6653,ssl:10.0.0.2:6653", "tcp:h:1"]) == [
        Target("10.0.0.1", 6653), Target("10.0.0.2", 6653, tls=True), Target("h", 1)]
    assert str(parse_targets(["ssl:[::1]:6653"])[0]) == "ssl:[::1]:6653"
    assert parse_targets([":6653"]) == [Target("127.0.0.1", 6653)]
    for bad, words in ((["a:1,a:1"], "twice"), (["a"], "HOST:PORT"), (["udp:a:1"], "HOST:PORT"), ([","], "no controller")):
        with pytest.raises(UpstreamConfigError, match=words):
            parse_targets(bad)


def test_repeated_controller_option_reaches_the_agent(monkeypatch):
    seen: dict = {}

    class Stop(Exception):
        pass

    def fake_start(self) -> None:
        seen["controllers"] = self.controllers
        raise Stop

    monkeypatch.setattr(OtsAgent, "start", fake_start)
    with pytest.raises(Stop):
        main(["--bridge", "b", "--dpid", "1", "--ports", "1:ODU2", "--controller", "10.0.0.1:6653",
              "--controller", "10.0.0.2:6653,10.0.0.3:6654"])
    assert [str(t) for t in seen["controllers"]] == ["tcp:10.0.0.1:6653", "tcp:10.0.0.2:6653", "tcp:10.0.0.3:6654"]
    time.sleep(0)  # nothing started: no thread to wait for
