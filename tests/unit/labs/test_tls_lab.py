"""TLS labs without OVS: the lab's CA, OVS's SSL set-up read back for restoring, the agents' options."""
from __future__ import annotations

import stat
import subprocess

import pytest

from mininet_labs import testbed
from mininet_labs.testbed import TlsFiles


def test_session_makes_its_ca_once_and_hands_the_switch_certificate(tmp_path):
    from mininet_labs.session import LabSession
    from topology.spec import fig2_testbed

    session = LabSession(fig2_testbed(), tmp_path, prefix="t1", tls=True)
    files = session.switch_tls()
    assert files == TlsFiles(key=str(tmp_path / "pki" / "switch-key.pem"), cert=str(tmp_path / "pki" / "switch-cert.pem"),
                             ca=str(tmp_path / "pki" / "ca-cert.pem"))
    assert stat.S_IMODE((tmp_path / "pki" / "switch-key.pem").stat().st_mode) == 0o600
    ca = (tmp_path / "pki" / "ca-cert.pem").read_bytes()
    assert session.switch_tls() == files and (tmp_path / "pki" / "ca-cert.pem").read_bytes() == ca  # not remade
    assert LabSession(fig2_testbed(), tmp_path / "plain", prefix="t2").switch_tls() is None


@pytest.mark.parametrize("out, want", [
    ("", None),
    ("Private key: /p/k.pem\nCertificate: /p/c.pem\nCA Certificate: /p/ca.pem\nBootstrap: false\n",
     TlsFiles(key="/p/k.pem", cert="/p/c.pem", ca="/p/ca.pem")),
])
def test_ovs_ssl_set_up_is_read_back_for_restoring(monkeypatch, out, want):
    calls = []

    def run(cmd, **kw):
        calls.append(cmd)
        return subprocess.CompletedProcess(cmd, 0, stdout=out, stderr="")

    monkeypatch.setattr(testbed.subprocess, "run", run)
    assert testbed._ovs_ssl() == want
    testbed.set_ovs_ssl(want)
    assert calls[-1][2:] == (["del-ssl"] if want is None else ["set-ssl", "/p/k.pem", "/p/c.pem", "/p/ca.pem"])


def test_agents_get_the_tls_options_the_agent_takes():
    """The lab passes the agent exactly the TLS options ``python -m ots_virtual`` parses."""
    from ots_virtual.__main__ import build_parser

    files = TlsFiles(key="/k", cert="/c", ca="/ca")
    args = testbed.agent_tls_args(files)
    assert args == ["--ssl-key", "/k", "--ssl-cert", "/c", "--ssl-ca", "/ca"]
    ns = build_parser().parse_args(["--bridge", "X", "--dpid", "0xf01", "--ports", "1:ODU2",
                                    "--controller", "ssl:127.0.0.1:6653", *args])
    assert (ns.ssl_key, ns.ssl_cert, ns.ssl_ca) == ("/k", "/c", "/ca")
