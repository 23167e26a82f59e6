"""The peers that are database servers of their own, each started on loopback in a work directory
by the bench that uses it and stopped when it is done: QuestDB, PostgreSQL, MariaDB.

Each module owns one server (how it is installed, started, configured and stopped) and its
`bench write` systems, with the face of `tracehouse.bench.write_systems` (declared in
pyproject.toml under `tracehouse.bench_peers`, so `tracehouse bench write` finds them).
A server not installed here raises `Unavailable`: the bench skips it and says why.
"""

from .mariadb import MariaDB, MariaDBServer
from .postgres import Postgres, PostgresServer
from .questdb import QuestDB, QuestDBSync, questdb_jar

__all__ = ["MariaDB", "MariaDBServer", "Postgres", "PostgresServer", "QuestDB", "QuestDBSync", "questdb_jar"]
