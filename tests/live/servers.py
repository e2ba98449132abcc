"""Throw-away PostgreSQL and MariaDB servers for tests, from the Debian packages.

Each server gets a fresh data directory under /tmp and a free port on 127.0.0.1, runs as a
child of the test process (never as a system service) and is stopped when the test session
ends. The servers are started with PR_SET_PDEATHSIG so that even a killed test run leaves no
server behind. A server that cannot start raises ``ServerError`` with its log: tests fail,
they never skip.
"""

from __future__ import annotations

import atexit
import ctypes
import glob
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

START_TIMEOUT_S = 60
STOP_TIMEOUT_S = 30
_PR_SET_PDEATHSIG = 1


class ServerError(RuntimeError):
    """A test server could not be installed, initialised or started."""


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _die_with_parent() -> None:
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


def _service_user(name: str) -> str | None:
    """Servers refuse to run as root: run them as the package's system user when we are root."""
    if os.geteuid() != 0:
        return None
    try:
        pwd.getpwnam(name)
    except KeyError as exc:
        raise ServerError(f"system user {name!r} is missing; run .ci/services") from exc
    return name


def _own_dir(path: Path, user: str | None) -> None:
    path.mkdir(parents=True, exist_ok=True)
    if user:
        shutil.chown(path, user, user)


def _run(cmd: list[str], user: str | None, log: Path) -> None:
    with open(log, "ab") as out:
        proc = subprocess.run(cmd, user=user, stdout=out, stderr=subprocess.STDOUT, check=False)
    if proc.returncode != 0:
        raise ServerError(f"{' '.join(cmd[:2])} failed ({proc.returncode}):\n{_tail(log)}")


def _tail(path: Path, n: int = 40) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-n:])
    except OSError:
        return f"(no log at {path})"


@dataclass
class _Server:
    root: Path
    port: int
    user: str | None
    log: Path
    proc: subprocess.Popen | None = field(default=None, repr=False)
    error_log: Path | None = None  # a log the server writes itself, shown when it fails

    def _logs(self) -> str:
        logs = [self.log] + ([self.error_log] if self.error_log else [])
        return "\n".join(f"--- {p.name}\n{_tail(p)}" for p in logs)

    def _spawn(self, cmd: list[str]) -> None:
        out = open(self.log, "ab")
        self.proc = subprocess.Popen(cmd, user=self.user, stdout=out, stderr=subprocess.STDOUT,
                                     preexec_fn=_die_with_parent, cwd=self.root)
        out.close()

    def _wait_ready(self, probe) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        last = None
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise ServerError(f"{type(self).__name__} exited with {self.proc.returncode}:\n"
                                  f"{self._logs()}")
            try:
                probe()
                return
            except Exception as exc:  # not up yet; the last error is the useful one
                last = exc
                time.sleep(0.2)
        self.stop()
        raise ServerError(f"{type(self).__name__} not ready after {START_TIMEOUT_S}s ({last}):\n"
                          f"{self._logs()}")

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(self._stop_signal)
        try:
            self.proc.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()

    _stop_signal = signal.SIGTERM

    def cleanup(self) -> None:
        self.stop()
        shutil.rmtree(self.root, ignore_errors=True)


def _pg_bin(tool: str) -> str:
    found = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{tool}"),
                   key=lambda p: int(p.split("/")[4]) if p.split("/")[4].isdigit() else 0)
    if not found:
        raise ServerError(f"PostgreSQL {tool} not found under /usr/lib/postgresql; run .ci/services")
    return found[-1]


@dataclass
class PostgresServer(_Server):
    """``postgres`` run directly (not pg_ctl) so it stays our child; superuser ``postgres``."""

    _stop_signal = signal.SIGINT  # "fast" shutdown

    @property
    def dsn(self) -> str:
        return self.dsn_for("postgres")

    def dsn_for(self, user: str, password: str | None = None, dbname: str = "postgres") -> str:
        auth = f"{user}:{password}@" if password else f"{user}@"
        return f"postgresql://{auth}127.0.0.1:{self.port}/{dbname}"

    def connect(self, user: str = "postgres", **kw):
        import psycopg

        return psycopg.connect(host="127.0.0.1", port=self.port, user=user, dbname="postgres",
                               connect_timeout=5, **kw)

    @classmethod
    def start(cls) -> "PostgresServer":
        user = _service_user("postgres")
        root = Path(tempfile.mkdtemp(prefix="cdc-live-pg-"))
        _own_dir(root, user)
        srv = cls(root=root, port=free_port(), user=user, log=root / "server.log")
        data = root / "data"
        _run([_pg_bin("initdb"), "-D", str(data), "-U", "postgres", "--auth=trust", "-E", "UTF8",
              "--locale=C", "--no-sync"], user, srv.log)
        srv._spawn([_pg_bin("postgres"), "-D", str(data), "-c", "listen_addresses=127.0.0.1",
                    "-c", f"port={srv.port}", "-c", f"unix_socket_directories={root}",
                    "-c", "fsync=off", "-c", "synchronous_commit=off",
                    "-c", "full_page_writes=off", "-c", "max_connections=50"])
        srv._wait_ready(lambda: srv.connect().close())
        return srv


@dataclass
class MariaDBServer(_Server):
    """``mariadbd`` with a row-based binlog as capture needs it; superuser ``root`` (no password)."""

    server_id: int = 1

    @property
    def dsn(self) -> str:
        return self.dsn_for("root")

    def dsn_for(self, user: str, password: str | None = None) -> str:
        auth = f"{user}:{password}@" if password else f"{user}@"
        return f"mariadb://{auth}127.0.0.1:{self.port}/"

    def connect(self, user: str = "root", password: str = "", **kw):
        import pymysql

        return pymysql.connect(host="127.0.0.1", port=self.port, user=user, password=password,
                               autocommit=True, connect_timeout=5, charset="utf8mb4", **kw)

    @classmethod
    def start(cls, server_id: int = 1) -> "MariaDBServer":
        user = _service_user("mysql")
        root = Path(tempfile.mkdtemp(prefix="cdc-live-maria-"))
        _own_dir(root, user)
        srv = cls(root=root, port=free_port(), user=user, log=root / "console.log",
                  error_log=root / "mysqld.err", server_id=server_id)
        data = root / "data"
        install = shutil.which("mariadb-install-db") or "/usr/bin/mariadb-install-db"
        _run([install, "--no-defaults", f"--datadir={data}", "--auth-root-authentication-method=normal",
              "--skip-test-db", "--skip-name-resolve"] + ([f"--user={user}"] if user else []),
             user, srv.log)
        mariadbd = shutil.which("mariadbd") or "/usr/sbin/mariadbd"
        srv._spawn([mariadbd, "--no-defaults", f"--datadir={data}", "--bind-address=127.0.0.1",
                    f"--port={srv.port}", f"--socket={root}/mysqld.sock",
                    f"--pid-file={root}/mysqld.pid", f"--log-error={srv.error_log}",
                    f"--log-bin={data}/mysql-bin", f"--server-id={server_id}",
                    "--binlog-format=ROW", "--binlog-row-image=FULL",
                    "--binlog-row-metadata=FULL", "--skip-name-resolve",
                    "--character-set-server=utf8mb4", "--collation-server=utf8mb4_unicode_ci",
                    "--innodb-buffer-pool-size=64M", "--innodb-flush-log-at-trx-commit=2",
                    "--sync-binlog=0", "--max-connections=50", "--default-time-zone=+00:00"])
        srv._wait_ready(lambda: srv.connect().close())
        return srv


_running: dict[str, _Server] = {}


def shared(kind: str) -> _Server:
    """One server of each kind per test process, started on first use, stopped at exit."""
    if kind not in _running:
        _running[kind] = {"postgres": PostgresServer, "mariadb": MariaDBServer}[kind].start()
    return _running[kind]


@atexit.register
def _stop_all() -> None:
    for srv in list(_running.values()):
        srv.cleanup()
    _running.clear()
