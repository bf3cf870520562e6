"""Full-text search on PostgreSQL: what `StoreQueries.search` asks of FTS5, in tsquery.

A plain search (every word must appear) is one `phraseto_tsquery` per word joined by `&&`, as
FTS5 reads one quoted string per word. A raw search accepts FTS5's query syntax where tsquery can
say the same: "phrases", prefix*, AND, OR, NOT and parentheses (precedence NOT > AND > OR, an
implicit AND between terms); NEAR, column filters and ^ are refused as a bad query.
"""

from __future__ import annotations

import re
from typing import Any

from .models import RolloutStoreError

#: ts_headline's counterpart of `snippet(..., '[', ']', ' … ', 24)`.
HEADLINE = (
    'StartSel=[, StopSel=], MaxWords=24, MinWords=12, MaxFragments=1, FragmentDelimiter=" … "'
)
_TOKEN = re.compile(r'\s*(?:(")|(\()|(\))|([^\s"()]+))')


class _BadQuery(ValueError):
    pass


def tsquery(text: str, *, raw: bool) -> tuple[str, list[str]] | None:
    """(SQL expression of type tsquery, its parameters); None when there is nothing to match."""
    if not raw:
        words = text.split()
        if not words:
            return None
        return " && ".join(["phraseto_tsquery('simple', ?)"] * len(words)), words
    try:
        parser = _Parser(text)
        sql = parser.parse()
    except _BadQuery as exc:
        raise RolloutStoreError(f"bad search query {text!r}: {exc}") from None
    return sql, parser.params


class _Parser:
    """Recursive descent over FTS5's syntax, writing a tsquery expression with `?` parameters."""

    def __init__(self, text: str) -> None:
        self.tokens = self._lex(text)
        self.pos = 0
        self.params: list[str] = []

    @staticmethod
    def _lex(text: str) -> list[tuple[str, str]]:
        tokens, i = [], 0
        while i < len(text):
            match = _TOKEN.match(text, i)
            if match is None or match.end() == i:
                break
            if match.group(1):  # a "phrase": "" inside is a quote, * right after is a prefix
                j, phrase = match.end(), ""
                while True:
                    close = text.find('"', j)
                    if close < 0:
                        raise _BadQuery("unterminated string")
                    phrase += text[j:close]
                    if text.startswith('""', close):
                        phrase, j = phrase + '"', close + 2
                        continue
                    break
                i = close + 1
                kind = "phrase"
                if text.startswith("*", i):
                    kind, i = "prefix", i + 1
                tokens.append((kind, phrase))
                continue
            i = match.end()
            if match.group(2) or match.group(3):
                tokens.append((match.group(2) or match.group(3), ""))
                continue
            word = match.group(4)
            if word in ("AND", "OR", "NOT"):
                tokens.append((word, ""))
            elif word == "NEAR" or ":" in word or word.startswith(("^", "+", "-")):
                raise _BadQuery(f"{word!r} (NEAR, column filters, ^ and +/-) is FTS5-only")
            elif word.endswith("*"):
                tokens.append(("prefix", word[:-1]))
            else:
                tokens.append(("phrase", word))
        return tokens

    def _peek(self) -> str | None:
        return self.tokens[self.pos][0] if self.pos < len(self.tokens) else None

    def parse(self) -> str:
        if not self.tokens:
            raise _BadQuery("empty query")
        sql = self._or()
        if self.pos != len(self.tokens):
            raise _BadQuery(f"unexpected {self.tokens[self.pos][0]!r}")
        return sql

    def _or(self) -> str:
        parts = [self._and()]
        while self._peek() == "OR":
            self.pos += 1
            parts.append(self._and())
        return parts[0] if len(parts) == 1 else "(" + " || ".join(parts) + ")"

    def _and(self) -> str:
        parts = [self._not()]
        while self._peek() in ("AND", "phrase", "prefix", "("):
            if self._peek() == "AND":
                self.pos += 1
            parts.append(self._not())
        return parts[0] if len(parts) == 1 else "(" + " && ".join(parts) + ")"

    def _not(self) -> str:
        sql = self._term()
        while self._peek() == "NOT":
            self.pos += 1
            sql = f"({sql} && !!{self._term()})"
        return sql

    def _term(self) -> str:
        kind = self._peek()
        if kind is None:
            raise _BadQuery("query ends early")
        self.pos += 1
        if kind == "(":
            sql = self._or()
            if self._peek() != ")":
                raise _BadQuery("unbalanced parenthesis")
            self.pos += 1
            return sql
        text = self.tokens[self.pos - 1][1]
        if kind == "phrase":
            self.params.append(text)
            return "phraseto_tsquery('simple', ?)"
        if kind == "prefix":
            words = re.findall(r"\w+", text)
            if not words:
                raise _BadQuery(f"nothing to match before * in {text!r}")
            # Every word of a prefix phrase in order, the last one as a prefix.
            self.params.append(" <-> ".join([*(f"'{w}'" for w in words[:-1]), f"'{words[-1]}':*"]))
            return "to_tsquery('simple', ?)"
        raise _BadQuery(f"unexpected {kind!r}")


def search_sql(query_sql: str) -> str:
    """The search over both tables for a tsquery expression, in the store's `?`/`:name` dialect:
    rank (ts_rank, negated: lower is better, as bm25's rank) only the newest `:window` matches of
    each table, and build headlines only for the rows returned.

    The expression is written out where it is used, not in a CTE: the planner then folds it to
    a constant and sees how common its words are (a common one: walk the newest rows by seq and
    stop at the window; a rare one: the GIN index). The window holds only seq: sorting 50k matches
    with their text spilled to disk (10x slower)."""
    query_sql = f"({query_sql})"
    return f"""
    WITH s AS (
        SELECT seq, -ts_rank(tool_output_tsv, {query_sql}) AS rank FROM steps
        WHERE tool_output_tsv @@ {query_sql} ORDER BY seq DESC LIMIT :window
    ),
    a AS (
        SELECT seq, -ts_rank(error_tsv, {query_sql}) AS rank FROM attempts
        WHERE error_tsv @@ {query_sql} ORDER BY seq DESC LIMIT :window
    ),
    hits AS (
        (SELECT st.attempt_id, st.idx AS step_index, 'tool_output' AS kind,
                st.tool_output AS body, top.rank
         FROM (SELECT * FROM s ORDER BY rank, seq DESC LIMIT :limit) top
         JOIN steps st ON st.seq = top.seq)
        UNION ALL
        (SELECT att.id, NULL::bigint, 'error', att.error, top.rank
         FROM (SELECT * FROM a ORDER BY rank, seq DESC LIMIT :limit) top
         JOIN attempts att ON att.seq = top.seq)
    )
    SELECT attempt_id, step_index, kind,
           ts_headline('simple', body, {query_sql}, :headline) AS snippet, rank
    FROM hits ORDER BY rank LIMIT :limit
    """


def search_params(params: list[str], *, limit: int, window: int) -> dict[str, Any]:
    """The named parameters of `search_sql` (the tsquery's `?`s become :p0, :p1, ...)."""
    return {
        **{f"p{i}": p for i, p in enumerate(params)},
        "limit": limit,
        "window": window,
        "headline": HEADLINE,
    }


def named(query_sql: str) -> str:
    """The tsquery expression with its `?` numbered :p0, :p1, ... (search_sql is all named)."""
    counter = iter(range(10**6))
    return re.sub(r"\?", lambda _: f":p{next(counter)}", query_sql)
