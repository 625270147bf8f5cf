"""``mlte pki``: a CA whose certificates a real TLS handshake accepts, and refuses from another CA."""
from __future__ import annotations

import socket
import ssl
import stat
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID

from app import pki
from app.cli.main import main
from app.config import merge_config, tls_files
from app.controller.compat import server_context
from app.errors import ConfigError

FILES = ["ca-cert.pem", "ca-key.pem", "controller-cert.pem", "controller-key.pem", "switch-cert.pem",
         "switch-key.pem"]


def _signed_by(cert_file: Path, ca_file: Path) -> bool:
    cert = x509.load_pem_x509_certificate(cert_file.read_bytes())
    ca = x509.load_pem_x509_certificate(ca_file.read_bytes())
    key = ca.public_key()
    assert isinstance(key, ec.EllipticCurvePublicKey)
    try:
        key.verify(cert.signature, cert.tbs_certificate_bytes, ec.ECDSA(cert.signature_hash_algorithm))
    except Exception:  # noqa: BLE001 - InvalidSignature
        return False
    return cert.issuer == ca.subject


def _handshake(server_dir: Path, client_cert: tuple[Path, Path] | None) -> str | None:
    """One TLS handshake between the controller's context and a client with ``client_cert``;
    the server's error ("" when it accepted the client)."""
    ctx = server_context(*tls_files({"tls_dir": str(server_dir), "tls_ca": "", "tls_cert": "", "tls_key": ""}))
    cctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    cctx.load_verify_locations(server_dir / "ca-cert.pem")  # the client checks the controller too
    if client_cert is not None:
        cctx.load_cert_chain(*client_cert)
    result: list[str] = []
    with socket.socket() as lsock:
        lsock.bind(("127.0.0.1", 0))
        lsock.listen(1)
        lsock.settimeout(10)

        def serve() -> None:
            conn, _ = lsock.accept()
            conn.settimeout(10)
            try:
                with ctx.wrap_socket(conn, server_side=True) as tls:
                    tls.sendall(b"ok")
                result.append("")
            except (ssl.SSLError, OSError) as exc:
                result.append(str(exc))
                conn.close()

        t = threading.Thread(target=serve, daemon=True)
        t.start()
        with socket.create_connection(lsock.getsockname(), timeout=10) as raw:
            try:
                with cctx.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
                    tls.recv(2)  # TLS 1.3: the server's verdict on our certificate arrives with the first read
            except (ssl.SSLError, OSError):
                pass
        t.join(10)
    return result[0] if result else None


def test_init_makes_a_ca_and_signed_certificates_with_private_keys(tmp_path):
    made = pki.init(tmp_path / "pki")
    d = tmp_path / "pki"
    assert sorted(p.name for p in d.iterdir()) == sorted(FILES)
    for f in FILES:
        mode = stat.S_IMODE((d / f).stat().st_mode)
        assert mode == (0o600 if f.endswith("key.pem") else 0o644), (f, oct(mode))
    assert _signed_by(made["controller"].cert, d / "ca-cert.pem")
    assert _signed_by(made["switch"].cert, d / "ca-cert.pem")
    ctl = x509.load_pem_x509_certificate(made["controller"].cert.read_bytes())
    sw = x509.load_pem_x509_certificate(made["switch"].cert.read_bytes())
    assert ExtendedKeyUsageOID.SERVER_AUTH in ctl.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert list(sw.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value) == [ExtendedKeyUsageOID.CLIENT_AUTH]
    san = ctl.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert "localhost" in san.get_values_for_type(x509.DNSName)


def test_tls_handshake_accepts_our_switch_and_refuses_others(tmp_path):
    pki.init(tmp_path / "ours")
    pki.init(tmp_path / "other")
    ours, other = tmp_path / "ours", tmp_path / "other"
    assert _handshake(ours, (ours / "switch-cert.pem", ours / "switch-key.pem")) == ""
    extra = pki.issue(ours, "ots-X")
    assert _handshake(ours, (extra.cert, extra.key)) == ""
    refused = _handshake(ours, (other / "switch-cert.pem", other / "switch-key.pem"))
    assert refused and "certificate verify failed" in refused
    no_cert = _handshake(ours, None)
    assert no_cert and "certificate" in no_cert.lower()


def test_never_overwrites_a_ca_or_a_certificate(tmp_path):
    pki.init(tmp_path)
    before = (tmp_path / "ca-key.pem").read_bytes()
    with pytest.raises(pki.PkiError, match="already holds a CA"):
        pki.init(tmp_path)
    assert (tmp_path / "ca-key.pem").read_bytes() == before
    with pytest.raises(pki.PkiError, match="switch-cert.pem already exists"):
        pki.issue(tmp_path, "switch")


@pytest.mark.parametrize("name", ["../x", "a/b", "", "ca", "-x", "x" * 65])
def test_issue_refuses_names_that_are_not_plain_file_stems(tmp_path, name):
    pki.init(tmp_path)
    with pytest.raises(pki.PkiError, match="bad certificate name"):
        pki.issue(tmp_path, name)


def test_issue_needs_a_matching_ca(tmp_path):
    with pytest.raises(pki.PkiError, match="holds no CA"):
        pki.issue(tmp_path, "s1")
    pki.init(tmp_path / "a")
    pki.init(tmp_path / "b")
    (tmp_path / "a" / "ca-key.pem").unlink()
    (tmp_path / "a" / "ca-key.pem").write_bytes((tmp_path / "b" / "ca-key.pem").read_bytes())
    with pytest.raises(pki.PkiError, match="is not the key of"):
        pki.issue(tmp_path / "a", "s1")


def test_init_on_a_file_is_one_line(tmp_path):
    f = tmp_path / "file"
    f.write_text("")
    with pytest.raises(pki.PkiError, match="not a directory"):
        pki.init(f)


def test_cli_init_issue_and_refusals_are_one_line(tmp_path, capsys):
    d = tmp_path / "pki"
    assert main(["pki", "init", str(d)]) == 0
    assert "controller:" in capsys.readouterr().out
    assert main(["pki", "issue", str(d), "ots-Y", "--server", "--server-name", "ctl2.example"]) == 0
    cert = x509.load_pem_x509_certificate((d / "ots-Y-cert.pem").read_bytes())
    assert cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value.get_values_for_type(
        x509.DNSName) == ["ctl2.example"]
    proc = subprocess.run([sys.executable, "-m", "app.cli.main", "pki", "init", str(d)],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.count("\n") == 1 and "already holds a CA" in proc.stderr
    assert main(["pki", "issue", str(d), "s2", "--server-name", "x"]) == 2
    assert "--server-name needs --server" in capsys.readouterr().err


def test_config_tls_needs_its_files_named():
    with pytest.raises(ConfigError, match="tls = true needs tls_dir"):
        merge_config({"controller": {"tls": True}})
    with pytest.raises(ConfigError, match="tls = true needs tls_dir"):
        merge_config({"controller": {"tls": True, "tls_ca": "/x", "tls_cert": "/y"}})
    ctl = merge_config({"controller": {"tls": True, "tls_dir": "/p", "tls_key": "/k.pem"}})["controller"]
    assert tls_files(ctl) == ("/p/ca-cert.pem", "/p/controller-cert.pem", "/k.pem")


def test_launcher_tls_options_listen_tls_only_and_check_files(tmp_path):
    from app.controller.launcher import tls_args

    ctl = merge_config({"controller": {"tls": True, "tls_dir": str(tmp_path), "listen_port": 6655}})["controller"]
    with pytest.raises(ConfigError, match=r"tls_ca .*ca-cert.pem: No such file"):
        tls_args(ctl)
    pki.init(tmp_path)
    args = tls_args(ctl)
    assert "--ofp-tcp-listen-port" not in args  # no plain-TCP listener
    assert args[args.index("--ofp-ssl-listen-port") + 1] == "6655"
    assert args[args.index("--ca-certs") + 1] == str(tmp_path / "ca-cert.pem")
    pki.init(tmp_path / "other")
    ctl["tls_key"] = str(tmp_path / "other" / "controller-key.pem")  # not the certificate's key
    with pytest.raises(ConfigError, match="key values mismatch"):
        tls_args(ctl)
