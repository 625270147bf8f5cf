"""A small certificate authority for OpenFlow over TLS (``mlte pki``).

Why our own: the controller requires client certificates signed by one CA, Open vSwitch takes a key,
a certificate and the CA certificate (``ovs-vsctl set-ssl``), and the OTS agents the same three files.
``ovs-pki`` does this too but shells out to ``openssl`` and is not everywhere; this module uses the
``cryptography`` package and writes the same PEM files.

Layout of a PKI directory (every key 0600, written once, never overwritten)::

    ca-cert.pem  ca-key.pem                  the CA (self-signed)
    controller-cert.pem  controller-key.pem  the controller's server certificate
    switch-cert.pem  switch-key.pem          a client certificate for every OVS bridge and OTS agent
    NAME-cert.pem  NAME-key.pem              more, from :func:`issue`

Keys are ECDSA P-256 (fast handshakes, accepted by OVS/OpenSSL 3 and Python's ssl).
"""
from __future__ import annotations

import datetime
import ipaddress
import os
import re
import socket
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from app.errors import MlteError

CA_CERT, CA_KEY = "ca-cert.pem", "ca-key.pem"
CONTROLLER = "controller"  # controller-cert.pem / controller-key.pem
SWITCH = "switch"  # switch-cert.pem / switch-key.pem
CA_DAYS = 3650
LEAF_DAYS = 825  # the longest leaf lifetime browsers accept; plenty for a lab or a deployment
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


class PkiError(MlteError):
    """A PKI directory or file that cannot be made or read (one line: the CLI exits 2)."""


@dataclass(frozen=True)
class Issued:
    """The two files of one certificate."""

    cert: Path
    key: Path


def cert_paths(directory: str | Path, name: str) -> Issued:
    d = Path(directory)
    return Issued(d / f"{name}-cert.pem", d / f"{name}-key.pem")


def _new_key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _write(path: Path, data: bytes, mode: int) -> None:
    """Create ``path`` with ``mode`` from the start (a key is never readable by others, even briefly);
    an existing file is an error, never overwritten."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    except FileExistsError:
        raise PkiError(f"{path} already exists; refusing to overwrite it") from None
    except OSError as exc:
        raise PkiError(f"cannot write {path}: {exc.strerror or exc}") from None
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    os.chmod(path, mode)  # the umask may have removed bits of a certificate's 0644


def _write_pair(out: Issued, cert: x509.Certificate, key: ec.EllipticCurvePrivateKey) -> None:
    _write(out.key, key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                      serialization.NoEncryption()), 0o600)
    _write(out.cert, cert.public_bytes(serialization.Encoding.PEM), 0o644)


def _public(key: object) -> bytes:
    return key.public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)  # type: ignore[attr-defined]


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "mlte"),
                      x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _san(names: list[str]) -> x509.SubjectAlternativeName:
    """DNS names and IP addresses a client may check the server certificate against."""
    entries: list[x509.GeneralName] = []
    for n in names:
        try:
            entries.append(x509.IPAddress(ipaddress.ip_address(n)))
        except ValueError:
            entries.append(x509.DNSName(n))
    return x509.SubjectAlternativeName(entries)


def default_server_names() -> list[str]:
    """What a local client dials: localhost, the loopback addresses and this host's name."""
    return ["localhost", "127.0.0.1", "::1", socket.gethostname()]


def _check_dir(directory: Path) -> None:
    if directory.exists() and not directory.is_dir():
        raise PkiError(f"{directory} is not a directory")
    try:
        directory.mkdir(mode=0o755, parents=True, exist_ok=True)
    except OSError as exc:
        raise PkiError(f"cannot create {directory}: {exc.strerror or exc}") from None


def _load_ca(directory: Path) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    cert_path, key_path = directory / CA_CERT, directory / CA_KEY
    try:
        cert = x509.load_pem_x509_certificate(cert_path.read_bytes())
        key = serialization.load_pem_private_key(key_path.read_bytes(), password=None)
    except FileNotFoundError as exc:
        raise PkiError(f"{directory} holds no CA ({Path(exc.filename).name} missing): run `mlte pki init {directory}` "
                       "first") from None
    except OSError as exc:
        raise PkiError(f"cannot read the CA in {directory}: {exc.strerror or exc}") from None
    except (ValueError, TypeError) as exc:
        raise PkiError(f"the CA in {directory} is not a PEM certificate and unencrypted key: {exc}") from None
    if not isinstance(key, ec.EllipticCurvePrivateKey) or _public(key.public_key()) != _public(cert.public_key()):
        raise PkiError(f"{key_path} is not the key of {cert_path}")
    return cert, key


def _sign(ca_cert: x509.Certificate, ca_key: ec.EllipticCurvePrivateKey, common_name: str,
          server: bool, names: list[str], days: int) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    key = _new_key()
    now = datetime.datetime.now(datetime.timezone.utc)
    usages = [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH] if server else \
        [ExtendedKeyUsageOID.CLIENT_AUTH]
    builder = (x509.CertificateBuilder()
               .subject_name(_name(common_name)).issuer_name(ca_cert.subject)
               .public_key(key.public_key()).serial_number(x509.random_serial_number())
               .not_valid_before(now - datetime.timedelta(minutes=5))  # clocks a little behind still accept it
               .not_valid_after(now + datetime.timedelta(days=days))
               .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
               .add_extension(x509.KeyUsage(digital_signature=True, content_commitment=False, key_encipherment=False,
                                            data_encipherment=False, key_agreement=True, key_cert_sign=False,
                                            crl_sign=False, encipher_only=False, decipher_only=False), critical=True)
               .add_extension(x509.ExtendedKeyUsage(usages), critical=False)
               .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False))
    if server:
        builder = builder.add_extension(_san(names), critical=False)
    return builder.sign(ca_key, hashes.SHA256()), key


def check_name(name: str) -> str:
    """A certificate name is also a file name: letters, digits, ``_.-``, no path."""
    if not _NAME.match(name) or name == "ca":
        raise PkiError(f"bad certificate name {name!r}: use letters, digits, '_', '.', '-' (not 'ca')")
    return name


def issue(directory: str | Path, name: str, server: bool = False, names: list[str] | None = None,
          days: int = LEAF_DAYS) -> Issued:
    """Sign a new certificate ``NAME-cert.pem`` + ``NAME-key.pem`` with the CA in ``directory``.

    ``server``: also usable as a TLS server (another controller), valid for ``names`` (default:
    :func:`default_server_names`); otherwise a client certificate (a switch, an OTS agent).
    """
    check_name(name)
    if days < 1:
        raise PkiError(f"days must be >= 1, got {days}")
    d = Path(directory)
    ca_cert, ca_key = _load_ca(d)
    out = cert_paths(d, name)
    for p in (out.cert, out.key):
        if p.exists():
            raise PkiError(f"{p} already exists; refusing to overwrite it")
    cert, key = _sign(ca_cert, ca_key, f"mlte {name}", server, names or default_server_names(), days)
    _write_pair(out, cert, key)
    return out


def init(directory: str | Path, server_names: list[str] | None = None, days: int = LEAF_DAYS) -> dict[str, Issued]:
    """Make a CA in ``directory`` and sign the controller's and the switches' certificates with it.

    Refuses a directory that already holds a CA: a new CA would silently lock out every switch
    configured with the old one."""
    d = Path(directory)
    _check_dir(d)
    for f in (CA_CERT, CA_KEY):
        if (d / f).exists():
            raise PkiError(f"{d} already holds a CA ({f}); refusing to overwrite it "
                           f"(use another directory, or `mlte pki issue {d} NAME` for one more certificate)")
    if days < 1:
        raise PkiError(f"days must be >= 1, got {days}")
    key = _new_key()
    now = datetime.datetime.now(datetime.timezone.utc)
    subject = _name("mlte OpenFlow CA")
    ca = (x509.CertificateBuilder()
          .subject_name(subject).issuer_name(subject)
          .public_key(key.public_key()).serial_number(x509.random_serial_number())
          .not_valid_before(now - datetime.timedelta(minutes=5))
          .not_valid_after(now + datetime.timedelta(days=CA_DAYS))
          .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
          .add_extension(x509.KeyUsage(digital_signature=False, content_commitment=False, key_encipherment=False,
                                       data_encipherment=False, key_agreement=False, key_cert_sign=True,
                                       crl_sign=True, encipher_only=False, decipher_only=False), critical=True)
          .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
          .sign(key, hashes.SHA256()))
    _write_pair(Issued(d / CA_CERT, d / CA_KEY), ca, key)
    return {"ca": Issued(d / CA_CERT, d / CA_KEY),
            CONTROLLER: issue(d, CONTROLLER, server=True, names=server_names, days=days),
            SWITCH: issue(d, SWITCH, days=days)}
