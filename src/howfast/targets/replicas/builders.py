"""Pure builders for standbys: the base backup's argv, a standby's settings, the primary's
replication settings, the SQL that reads and sets replication. Tested on their output."""

from __future__ import annotations

import base64
import hashlib
import hmac
from pathlib import PurePath

from howfast.targets.base import Connection
from howfast.targets.replicas.spec import ReplicaSpec

GIB = 1024**3
MAX_SLOT_KEEP_BYTES = 4 * GIB
SLOT_KEEP_SHARE = 0.25  # of the free space of the primary's WAL filesystem


def basebackup_argv(
    pg_basebackup: str, primary: Connection, data_dir: PurePath, slot: str
) -> list[str]:
    """A base backup that streams the WAL written meanwhile (-X stream: no gap) after a fast
    checkpoint, creating the slot that keeps the primary's WAL from the backup's start (-C -S).
    Over the primary's socket locally: no TCP, no password (initdb's pg_hba trusts local
    replication). No -R: howfast writes its own, minimal primary_conninfo. --no-sync: the
    standby's first start syncs its whole data directory anyway (the copied pg_control says
    the server was running, so PostgreSQL's start-up treats it as after a crash and syncs
    every file before recovery), and a copy that never started is never used: syncing each
    file here too did that work twice (about 5 s per standby on a 2 ms emulated volume)."""
    return [
        pg_basebackup,
        "-D",
        str(data_dir),
        "-h",
        primary.host,
        "-p",
        str(primary.port),
        "-U",
        primary.user,
        "-X",
        "stream",
        "-c",
        "fast",
        "-C",
        "-S",
        slot,
        "--no-password",
        "--no-sync",
    ]


def conninfo_value(value: str) -> str:
    """One libpq conninfo value, quoted when it needs to be."""
    if value and not any(c in value for c in " '\\="):
        return value
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def primary_conninfo(name: str, primary: Connection, passfile: str | None = None) -> str:
    """How a standby reaches its primary; never a password (a passfile, when one is needed)."""
    parts = {
        "host": primary.host,
        "port": str(primary.port),
        "user": primary.user,
        "application_name": name,
        **primary.options,
    }
    if passfile:
        parts["passfile"] = passfile
    return " ".join(f"{k}={conninfo_value(v)}" for k, v in parts.items())


def standby_conf(
    name: str,
    port: int,
    socket_dir: str,
    primary: Connection,
    passfile: str | None = None,
    listen_addresses: str = "",
    syncfs: bool = False,
) -> dict[str, str]:
    """The settings a base backup's copy needs to run as standby `name`. The copied
    postgresql.auto.conf may hold the primary's ALTER SYSTEM values: synchronous_standby_names
    is emptied here, since a standby promoted with it would wait for itself. `syncfs`
    (PostgreSQL 14 and later): its start-up sync of the data directory as one syncfs() of
    its filesystem (recovery_init_sync_method) instead of an fsync per file, each a flush of
    the device: 4 to 5 s per start on a 2 ms emulated volume."""
    sync_method = {"recovery_init_sync_method": "syncfs"} if syncfs else {}
    return {
        **sync_method,
        "port": str(port),
        "unix_socket_directories": socket_dir,
        "listen_addresses": listen_addresses,
        "hot_standby": "on",
        "primary_conninfo": primary_conninfo(name, primary, passfile),
        "primary_slot_name": name,
        "synchronous_standby_names": "",
    }


# -- replication over TCP on loopback (a local target's standbys) ---------------------------
# Each standby reaches its primary on a loopback address of its own (standby_1: 127.0.0.2),
# which the primary (and every standby, which may be promoted) listens on: its packets are
# told apart from the load's (a socket, or 127.0.0.1 with --client tcp) and from the other
# standbys', so that a `partition` event can drop them alone (machine/packetfilter.py).
REPLICATION_ROLE = "howfast_replication"
SCRAM_ITERATIONS = 4096


def replication_address(index: int) -> str:
    """Where standby `index` (1 for standby_1) reaches its primary."""
    if not 1 <= index <= 253:
        raise ValueError(f"no loopback replication address for standby {index}")
    return f"127.0.0.{1 + index}"


def replication_listen(count: int) -> list[str]:
    """The addresses every server of a design of `count` standbys listens on."""
    return [replication_address(i) for i in range(1, count + 1)]


# First in pg_hba.conf: TCP on loopback always asks for a password. initdb's own host lines
# (trust without --client tcp) name 127.0.0.1 only, and a client reaching 127.0.0.2 from
# 127.0.0.1 would match them: these come before. The replication role has a random password
# (in memory and in each standby's passfile only); howfast's superuser has none without
# --client tcp, so it cannot log in over TCP.
HBA_FIRST = (
    "# set by howfast: replication over TCP on loopback, with a password\n"
    f"host replication {REPLICATION_ROLE} 127.0.0.0/8 scram-sha-256\n"
    "host replication all 127.0.0.0/8 scram-sha-256\n"
    "host all all 127.0.0.0/8 scram-sha-256\n"
)


def scram_verifier(password: str, salt: bytes, iterations: int = SCRAM_ITERATIONS) -> str:
    """The SCRAM-SHA-256 verifier PostgreSQL stores for `password` (RFC 5802/7677, as libpq's
    PQencryptPasswordConn makes it): the password itself never reaches the server."""
    salted = hashlib.pbkdf2_hmac("sha256", password.encode(), salt, iterations)
    client_key = hmac.new(salted, b"Client Key", hashlib.sha256).digest()
    stored_key = hashlib.sha256(client_key).digest()
    server_key = hmac.new(salted, b"Server Key", hashlib.sha256).digest()

    def b64(data: bytes) -> str:
        return base64.b64encode(data).decode()

    return f"SCRAM-SHA-256${iterations}:{b64(salt)}${b64(stored_key)}:{b64(server_key)}"


def replication_role_sql(verifier: str) -> str:
    """The role the standbys log in as (a verifier has no quote: base64, `$`, `:`)."""
    assert "'" not in verifier
    return f"CREATE ROLE {REPLICATION_ROLE} WITH LOGIN REPLICATION PASSWORD '{verifier}'"


def pgpass_line(address: str, port: int, password: str) -> str:
    """A passfile's line for the replication role (`:` and `\\` escaped)."""

    def esc(value: str) -> str:
        return value.replace("\\", "\\\\").replace(":", "\\:")

    return f"{esc(address)}:{port}:*:{REPLICATION_ROLE}:{esc(password)}\n"


def slot_keep_bytes(free_bytes: int | None) -> int:
    """max_slot_wal_keep_size: a standby that dies cannot fill the storage under test."""
    if free_bytes is None:
        return MAX_SLOT_KEEP_BYTES
    return max(64 * 1024**2, min(MAX_SLOT_KEEP_BYTES, int(free_bytes * SLOT_KEEP_SHARE)))


def primary_replication_settings(spec: ReplicaSpec, keep_bytes: int) -> dict[str, str]:
    """What the primary's postgresql.conf needs before its standbys are built."""
    senders = str(max(10, spec.count + 2))
    return {
        "wal_level": "replica",
        "max_wal_senders": senders,
        "max_replication_slots": senders,
        "max_slot_wal_keep_size": f"{keep_bytes // 1024**2}MB",
    }


def make_synchronous_sql(spec: ReplicaSpec) -> list[str]:
    """The statements that put the design in force on the primary (then a reload)."""
    names = spec.synchronous_standby_names.replace("'", "''")
    return [
        f"ALTER SYSTEM SET synchronous_standby_names = '{names}'",
        f"ALTER SYSTEM SET synchronous_commit = '{spec.synchronous_commit}'",
        "SELECT pg_reload_conf()",
    ]


RELEASE_SQL = (
    "ALTER SYSTEM RESET synchronous_standby_names",
    "ALTER SYSTEM RESET synchronous_commit",
    "SELECT pg_reload_conf()",
)

# One row per walsender, LSNs as numbers (bytes since 0/0), lags in milliseconds (NULL: no
# measurement, idle or just after a change: never 0).
STATE_COLUMNS = (
    "application_name",
    "state",
    "sync_state",
    "sync_priority",
    "sent_lsn",
    "write_lsn",
    "flush_lsn",
    "replay_lsn",
    "write_lag_ms",
    "flush_lag_ms",
    "replay_lag_ms",
    "current_lsn",
)
STATE_QUERY = (
    "SELECT application_name, state, sync_state, sync_priority, "
    "pg_wal_lsn_diff(sent_lsn, '0/0')::bigint, pg_wal_lsn_diff(write_lsn, '0/0')::bigint, "
    "pg_wal_lsn_diff(flush_lsn, '0/0')::bigint, pg_wal_lsn_diff(replay_lsn, '0/0')::bigint, "
    "extract(epoch FROM write_lag) * 1000, extract(epoch FROM flush_lag) * 1000, "
    "extract(epoch FROM replay_lag) * 1000, "
    "pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::bigint "
    "FROM pg_catalog.pg_stat_replication ORDER BY application_name"
)
SLOTS_QUERY = (
    "SELECT slot_name, coalesce(wal_status, '') FROM pg_catalog.pg_replication_slots "
    "WHERE slot_type = 'physical' ORDER BY slot_name"
)
