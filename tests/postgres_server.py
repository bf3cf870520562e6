"""A real PostgreSQL server for the tests: Debian's binaries, a private data folder and unix
socket in a temporary folder, no TCP port, stopped by its PID at the end of the session.

initdb refuses to run as root: as root the server runs as the package's `postgres` user (the
folder is handed to it); the tests connect over the socket with trust authentication. Skipped,
saying why, only where no PostgreSQL binaries are installed (`make setup` installs them).
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest


def postgres_bin() -> Path | None:
    """The newest installed server's bin folder (Debian: /usr/lib/postgresql/N/bin)."""
    found = sorted(
        glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(p.split("/")[4])
    )
    if found:
        return Path(found[-1]).parent
    initdb = shutil.which("initdb")
    return Path(initdb).parent if initdb else None


@dataclass
class PostgresServer:
    socket_dir: Path
    pid: int

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://postgres@/{database}?host={self.socket_dir}"

    def new_database(self) -> str:
        """A URL nothing has written to (each test its own: counts start from zero): a fresh
        schema of the one database, named by libpq's `options` (CREATE DATABASE takes ~1 s)."""
        import psycopg
        from psycopg import sql

        name = f"t_{uuid.uuid4().hex[:12]}"
        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(name)))
        return f"{self.url()}&options=-csearch_path%3D{name}"


def _as_postgres_user() -> dict[str, object]:
    if os.geteuid() != 0:
        return {}
    try:
        pwd.getpwnam("postgres")
    except KeyError:
        pytest.skip("running as root and no `postgres` user to run the server as")
    return {"user": "postgres", "group": "postgres"}


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    bin_dir = postgres_bin()
    if bin_dir is None:
        pytest.skip("PostgreSQL is not installed (no initdb): `make setup` installs postgresql")
    pytest.importorskip("psycopg", reason="the postgres extra is not installed")
    run_as = _as_postgres_user()
    folder = Path(tempfile.mkdtemp(prefix="aes-pg-"))
    if run_as:
        shutil.chown(folder, "postgres", "postgres")
    data = folder / "data"
    subprocess.run(
        [str(bin_dir / "initdb"), "-D", str(data), "-A", "trust", "-U", "postgres",
         "-E", "UTF8", "--no-locale", "--no-sync"],
        check=True, capture_output=True, **run_as,  # type: ignore[arg-type]
    )  # fmt: skip
    log = open(folder / "server.log", "wb")  # noqa: SIM115 - the server writes it until the end
    server = subprocess.Popen(
        [str(bin_dir / "postgres"), "-D", str(data), "-k", str(folder),
         "-c", "listen_addresses=", "-c", "fsync=off", "-c", "synchronous_commit=off",
         "-c", "full_page_writes=off", "-c", "max_connections=200"],
        stdout=log, stderr=subprocess.STDOUT, **run_as,  # type: ignore[arg-type]
    )  # fmt: skip
    try:
        import psycopg

        ready = PostgresServer(socket_dir=folder, pid=server.pid)
        deadline = time.monotonic() + 60
        while True:
            try:
                psycopg.connect(ready.url(), connect_timeout=5).close()
                break
            except psycopg.OperationalError:  # no socket yet, or still starting up
                if server.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"postgres did not start: {(folder / 'server.log').read_text()}")
                time.sleep(0.1)
        yield ready
    finally:
        # Fast shutdown: open sessions are ended, the data folder is left consistent.
        os.kill(server.pid, signal.SIGINT)
        try:
            server.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.kill(server.pid, signal.SIGKILL)
            server.wait()
        log.close()
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def postgres_url(postgres_server: PostgresServer) -> str:
    """A fresh database on the session's server."""
    return postgres_server.new_database()
