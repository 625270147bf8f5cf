"""A real, throw-away PostgreSQL server for tests and labs (Debian ``postgresql`` package binaries).

Labs with several controllers share one database; a SQLite write lock held by a controller frozen
mid-transaction (SIGSTOP) would block every other controller's writes until it wakes, while
PostgreSQL ends such a session (docs/operations.md "Database fencing"), so those labs run on this.

``initdb`` into a temp dir, ``pg_ctl start`` on a free loopback port with the socket in that dir,
``stop`` + remove at the end. As root the server runs as the ``postgres`` user (PostgreSQL refuses
to run as root). :func:`find_bindir` returns None when the binaries are missing: callers skip with
that reason.
"""
from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def find_bindir() -> Path | None:
    """The newest ``/usr/lib/postgresql/<ver>/bin`` with initdb and pg_ctl (or those on PATH)."""
    for d in sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=lambda p: int(Path(p).parent.name), reverse=True):
        if (Path(d) / "initdb").exists() and (Path(d) / "pg_ctl").exists():
            return Path(d)
    initdb = shutil.which("initdb")
    return Path(initdb).parent if initdb and shutil.which("pg_ctl") else None


@dataclass
class PostgresServer:
    bindir: Path
    datadir: Path
    port: int
    user: str

    @property
    def base_url(self) -> str:
        return f"postgresql+psycopg://{self.user}@127.0.0.1:{self.port}"

    def url(self, dbname: str = "postgres") -> str:
        return f"{self.base_url}/{dbname}"

    def create_database(self, name: str) -> str:
        """Create a fresh database and return its SQLAlchemy URL."""
        import psycopg

        with psycopg.connect(f"host=127.0.0.1 port={self.port} user={self.user} dbname=postgres",
                             autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}"')
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)


def _as_owner(cmd: list[str], owner: str | None) -> list[str]:
    return cmd if owner is None else ["runuser", "-u", owner, "--", *cmd]


@contextlib.contextmanager
def postgres_server(bindir: Path | None = None) -> Iterator[PostgresServer]:
    """Start a private server; stop it and delete its files when the block ends (even on errors)."""
    bindir = bindir or find_bindir()
    if bindir is None:
        raise FileNotFoundError("PostgreSQL binaries (initdb, pg_ctl) not found: apt-get install postgresql")
    owner = "postgres" if os.geteuid() == 0 else None
    tmp = Path(tempfile.mkdtemp(prefix="mlte-pg-"))
    datadir = tmp / "data"
    port = free_port()
    if owner is not None:
        pw = pwd.getpwnam(owner)
        os.chown(tmp, pw.pw_uid, pw.pw_gid)
    log = tmp / "server.log"
    started = False
    try:
        subprocess.run(_as_owner([str(bindir / "initdb"), "-D", str(datadir), "-U", "postgres", "-A", "trust",
                                  "-E", "UTF8", "--no-sync"], owner),
                       check=True, capture_output=True, timeout=120)
        opts = (f"-p {port} -k {tmp} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200 "
                f"-c synchronous_commit=off -c full_page_writes=off")
        subprocess.run(_as_owner([str(bindir / "pg_ctl"), "-D", str(datadir), "-l", str(log), "-o", opts,
                                  "-w", "-t", "60", "start"], owner), check=True, capture_output=True, timeout=90)
        started = True
        yield PostgresServer(bindir, datadir, port, "postgres")
    finally:
        if started:
            subprocess.run(_as_owner([str(bindir / "pg_ctl"), "-D", str(datadir), "-m", "fast", "-w", "stop"], owner),
                           capture_output=True, timeout=60)
        shutil.rmtree(tmp, ignore_errors=True)
