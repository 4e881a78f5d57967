"""Reading and writing a postgres store's tables from outside the store (tests)."""

from __future__ import annotations


def pg_sql(store_url: str, sql: str, params: tuple[object, ...] = ()) -> list[tuple[object, ...]]:
    """Run ``sql`` on a postgres store's database as an outsider would (``{s}`` = the store's schema);
    the rows it returns (``[]`` for a statement without rows)."""
    from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

    import psycopg

    parts = urlsplit(store_url)
    query = dict(parse_qsl(parts.query))
    schema = query.pop("schema", "public")
    url = urlunsplit(parts._replace(query=urlencode({k: v for k, v in query.items() if k == "sslmode"})))
    with psycopg.connect(url, autocommit=True) as conn:
        cur = conn.execute(sql.replace("{s}", f'"{schema}"').encode(), params)  # type: ignore[call-overload]
        return list(cur.fetchall()) if cur.description else []
