"""History search: find what a session said earlier, even after compaction evicted it.

The raw history of a session is indexed as it grows (SQLite FTS5, BM25) and searched by the
``recall`` strategy, the ``ctxlife_search_history`` tool and ``ctxlife session search``; how, and
``HistorySearch(store).passages(session_id, query)`` from Python: docs/strategies/recall.md.
"""

from ctxlife.messages import QUOTE_MARK, quote
from ctxlife.recall.block import RECALL_HEADER, chunk_span, excerpt, position, render
from ctxlife.recall.history import (
    MEMORY,
    HistorySearch,
    Passage,
    configured_index_dir,
    default_index_dir,
    live_keys,
    passages_from,
    read_records,
    remove_index,
    split_question,
)
from ctxlife.recall.index import INDEX_VERSION, HistoryIndex, Hit, StoredRecord
from ctxlife.recall.records import CHUNK_CHARS, Document, chunks
from ctxlife.recall.text import bigrams, dates_in, index_text, need_for_past, query_terms

__all__ = [
    "CHUNK_CHARS",
    "INDEX_VERSION",
    "MEMORY",
    "QUOTE_MARK",
    "RECALL_HEADER",
    "Document",
    "HistoryIndex",
    "HistorySearch",
    "Hit",
    "Passage",
    "StoredRecord",
    "bigrams",
    "chunk_span",
    "chunks",
    "configured_index_dir",
    "dates_in",
    "default_index_dir",
    "excerpt",
    "index_text",
    "live_keys",
    "need_for_past",
    "passages_from",
    "position",
    "quote",
    "query_terms",
    "read_records",
    "remove_index",
    "render",
    "split_question",
]
