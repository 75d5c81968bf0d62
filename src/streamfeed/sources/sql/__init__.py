"""SQL databases as sources: PostgreSQL through ADBC (Arrow), SQLite through the standard library, the rest
through SQLAlchemy Core (``alchemy.py``).

``connection.py`` parses the connection string and keeps its password out
of every text; ``source.py`` cuts a table or query into keyset ranges of a
unique key column and reads each one (see its docstring for the snapshot
semantics).
"""

from .connection import Connection, parse_connection
from .source import SqlFragment, SqlSource

__all__ = ["Connection", "SqlFragment", "SqlSource", "parse_connection"]
