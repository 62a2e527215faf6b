"""The client placement part of a local target: pgbench on this machine, over the server's
socket or over TCP to 127.0.0.1 (--client tcp) with a password that lives in memory only."""

from __future__ import annotations

import os
import secrets
from dataclasses import replace
from pathlib import Path

from howfast.hosts.base import Host
from howfast.targets.base import Connection
from howfast.targets.capabilities import ClientPlacement
from howfast.targets.local.options import TCP_ADDRESS, LocalClient
from howfast.targets.osuser import OsUser


def client_placement(
    mode: LocalClient, server: Connection, host: Host, password: str | None
) -> ClientPlacement:
    """pgbench on this machine, over the server's socket or over TCP to 127.0.0.1 on the
    server's port (with the password, which reaches pgbench through its environment only)."""
    if mode == "tcp":
        conn = replace(server, host=TCP_ADDRESS, password=password)
        return ClientPlacement(
            host, conn, {"placement": "tcp", "address": f"{TCP_ADDRESS}:{server.port}"}
        )
    address = f"{server.host}/.s.PGSQL.{server.port}"
    return ClientPlacement(host, server, {"placement": "socket", "address": address})


class ClientAccess:
    """--client tcp: pgbench reaches the server over 127.0.0.1 with a password (random, in
    memory only) that the TCP lines of pg_hba.conf ask for; howfast's own connections stay
    on the socket."""

    def __init__(self, mode: LocalClient, token: str) -> None:
        self.mode: LocalClient = mode
        self.token = token
        self.password = secrets.token_urlsafe(24) if mode == "tcp" else None

    def password_file(self, run_dir: Path | None) -> Path | None:
        """Where initdb reads the password from: the private run directory."""
        if self.mode != "tcp":
            return None
        return (run_dir or Path(f"howfast-run-{self.token}-XXXXXXXX")) / "client-password"

    def auth_argv(self, run_dir: Path | None) -> list[str]:
        pwfile = self.password_file(run_dir)
        if pwfile is None:
            return ["--auth=trust"]  # socket-only in a 0700 directory: only this user and root
        # the socket as before; TCP (127.0.0.1 only) asks for the password
        return ["--auth-local=trust", "--auth-host=scram-sha-256", f"--pwfile={pwfile}"]

    def write_password(self, pwfile: Path, user: OsUser) -> None:
        fd = os.open(pwfile, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as out:
            out.write(f"{self.password}\n")
        if user.uid != os.geteuid():
            os.chown(pwfile, user.uid, user.gid)

    def listen_settings(self) -> dict[str, str]:
        return {"listen_addresses": TCP_ADDRESS} if self.mode == "tcp" else {}

    def planned_host(self, socket_dir: Path) -> str:
        """What pgbench and the round-trip probe dial, for --dry-run."""
        return TCP_ADDRESS if self.mode == "tcp" else str(socket_dir)

    def placement(self, server: Connection, host: Host) -> ClientPlacement:
        return client_placement(self.mode, server, host, self.password)
