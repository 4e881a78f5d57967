"""The PostgreSQL store's schema: the version this ctxlife writes, its tables, and the steps from older versions.

What each table holds and how a database is migrated: docs/sessions.md, "PostgreSQL".
"""

from __future__ import annotations

__all__ = ["MIGRATIONS", "SCHEMA_VERSION", "V1", "V2"]

#: The schema version this ctxlife writes and reads.
SCHEMA_VERSION = 2

#: Version 2: recall's rows next to the raw history (:mod:`ctxlife.recall.pg`). The session's
#: counters are BM25's N and average length; a document hangs off its slot's row, which hangs off
#: the session's (``ON DELETE CASCADE`` both).
V2 = [
    "ALTER TABLE {s}.ctxlife_sessions ADD COLUMN IF NOT EXISTS recall_docs bigint NOT NULL DEFAULT 0,"
    " ADD COLUMN IF NOT EXISTS recall_len bigint NOT NULL DEFAULT 0",
    "CREATE TABLE IF NOT EXISTS {s}.ctxlife_recall ("
    " session_id text NOT NULL REFERENCES {s}.ctxlife_sessions ON DELETE CASCADE,"
    " slot bigint NOT NULL,"
    " role text NOT NULL,"
    " recorded_at double precision,"
    " md integer,"
    " view text NOT NULL,"
    " calls boolean NOT NULL,"
    " text text NOT NULL,"
    " PRIMARY KEY (session_id, slot))",
    "CREATE INDEX IF NOT EXISTS ctxlife_recall_by_day ON {s}.ctxlife_recall (session_id, md) WHERE md IS NOT NULL",
    "CREATE TABLE IF NOT EXISTS {s}.ctxlife_recall_docs ("
    " session_id text NOT NULL,"
    " slot bigint NOT NULL,"
    " part integer NOT NULL,"
    " view text NOT NULL,"
    " len integer NOT NULL,"
    " terms tsvector NOT NULL,"
    " PRIMARY KEY (session_id, slot, part),"
    " FOREIGN KEY (session_id, slot) REFERENCES {s}.ctxlife_recall ON DELETE CASCADE)",
    "CREATE INDEX IF NOT EXISTS ctxlife_recall_docs_terms ON {s}.ctxlife_recall_docs USING gin (terms)"
    " WITH (fastupdate = off)",  # searched on every call: no pending list to scan (see ctxlife.recall.pg)
]

#: ``{version: statements}`` bringing a database from ``version - 1`` to ``version`` (run by
#: :meth:`PostgresStore.migrate`, and when the first write creates the schema in an empty database).
#: ``{s}`` is the quoted schema name.
MIGRATIONS: dict[int, list[str]] = {2: V2}

V1 = [
    "CREATE TABLE IF NOT EXISTS {s}.ctxlife_sessions ("
    " session_id text PRIMARY KEY,"
    " head bigint NOT NULL DEFAULT 0,"
    " touched_at double precision NOT NULL)",
    "CREATE INDEX IF NOT EXISTS ctxlife_sessions_by_touch ON {s}.ctxlife_sessions (touched_at)",
    "CREATE TABLE IF NOT EXISTS {s}.ctxlife_raw ("
    " session_id text NOT NULL REFERENCES {s}.ctxlife_sessions ON DELETE CASCADE,"
    " seq bigint NOT NULL,"
    " view text NOT NULL,"
    " fp text NOT NULL,"
    " recorded_at double precision NOT NULL,"
    " bad text,"
    " tokens integer,"
    " token_encoding text,"
    " json text NOT NULL,"
    " PRIMARY KEY (session_id, seq))",
    "CREATE INDEX IF NOT EXISTS ctxlife_raw_by_view ON {s}.ctxlife_raw (session_id, view, seq)",
    "CREATE TABLE IF NOT EXISTS {s}.ctxlife_snapshots ("
    " session_id text NOT NULL REFERENCES {s}.ctxlife_sessions ON DELETE CASCADE,"
    " view text NOT NULL,"
    " updated_at double precision NOT NULL,"
    " json text NOT NULL,"
    " PRIMARY KEY (session_id, view))",
    "CREATE TABLE IF NOT EXISTS {s}.ctxlife_blobs ("
    " session_id text NOT NULL REFERENCES {s}.ctxlife_sessions ON DELETE CASCADE,"
    " key text NOT NULL,"
    " data bytea NOT NULL,"
    " PRIMARY KEY (session_id, key))",
    # the store's own values (the secret keying the marks on inserted messages), not a session's
    "CREATE TABLE IF NOT EXISTS {s}.ctxlife_meta (key text PRIMARY KEY, value text NOT NULL)",
]
