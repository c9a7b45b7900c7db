"""Where a class's polls and answers live: one store every app process reaches (no Streamlit here).

SQLite by default (one file, WAL mode: the replicas of ``deploy.course`` share it on one computer), PostgreSQL
when ``ATTENTION_LAB_CLASS_DB=postgresql://...`` (psycopg 3). The schema is made on first use and versioned
(``schema_version``; :data:`MIGRATIONS`). A *room* is a join code the class scans once; each question asked in it
is a *poll* (``seq`` 1, 2, ...); the room's current poll is the one it shows (``rooms.shown``: the latest asked, or an
earlier one a lesson went back to). Nothing personal is stored: an answer
is keyed by a random id of the student's browser session, and a room's teacher is whoever holds its secret
(only its hash is stored). One answer per session and poll (a primary key; changing it updates the row), so an
answer is counted once however often it is sent.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from attn_core.messages import N_, fill

DB_ENV = "ATTENTION_LAB_CLASS_DB"
DEFAULT_PATH = Path.home() / ".cache" / "attention-lab" / "classroom.sqlite3"
CODE_ALPHABET = "23456789ABCDEFGHJKMNPQRSTUVWXYZ"  # no 0/O, 1/I/L: read off a projector
CODE_LENGTH = 7  # 31**7 ≈ 2.8e10 codes: a neighbouring class does not land in this one by a typo
EXPIRY_S = 4 * 3600  # a room (and its polls) lives four hours after its last question
RATE_PER_MINUTE = 300  # answers one browser session may send a minute (changes included)

MIGRATIONS: list[list[str]] = [  # version i+1 is MIGRATIONS[i]; append, never edit
    [
        "CREATE TABLE rooms (code TEXT PRIMARY KEY, secret_hash TEXT NOT NULL, created DOUBLE PRECISION NOT NULL, "
        "expires DOUBLE PRECISION NOT NULL)",
        "CREATE TABLE polls (code TEXT NOT NULL REFERENCES rooms(code) ON DELETE CASCADE, seq INTEGER NOT NULL, "
        "question TEXT NOT NULL, n_choices INTEGER NOT NULL, state TEXT NOT NULL, created DOUBLE PRECISION NOT NULL, "
        "PRIMARY KEY (code, seq))",
        "CREATE TABLE answers (code TEXT NOT NULL, seq INTEGER NOT NULL, session TEXT NOT NULL, "
        "choice INTEGER NOT NULL, updated DOUBLE PRECISION NOT NULL, PRIMARY KEY (code, seq, session), "
        "FOREIGN KEY (code, seq) REFERENCES polls(code, seq) ON DELETE CASCADE)",
        "CREATE TABLE rate (session TEXT NOT NULL, minute BIGINT NOT NULL, count INTEGER NOT NULL, "
        "PRIMARY KEY (session, minute))",
    ],
    [  # lessons (dashboard/classroom/lessons.py): saved lessons, a room's running lesson and step, shared drawings
        "CREATE TABLE lessons (title TEXT PRIMARY KEY, body TEXT NOT NULL, updated DOUBLE PRECISION NOT NULL)",
        "CREATE TABLE room_lessons (code TEXT PRIMARY KEY REFERENCES rooms(code) ON DELETE CASCADE, "
        "body TEXT NOT NULL, step INTEGER NOT NULL, moved DOUBLE PRECISION NOT NULL)",
        "CREATE TABLE step_renders (key TEXT PRIMARY KEY, body TEXT NOT NULL, created DOUBLE PRECISION NOT NULL)",
    ],
    [  # a saved lesson's owner: the device id of the browser that saved it (NULL: saved before; the next saver's)
        "ALTER TABLE lessons ADD COLUMN owner TEXT",
    ],
    [  # the poll a room shows (NULL: its latest; a lesson's Back shows a step's poll again), each lesson step's poll
        "ALTER TABLE rooms ADD COLUMN shown INTEGER",
        "CREATE TABLE lesson_polls (code TEXT NOT NULL REFERENCES rooms(code) ON DELETE CASCADE, "
        "step INTEGER NOT NULL, seq INTEGER NOT NULL, PRIMARY KEY (code, step))",
    ],
]
STATES = ("open", "closed", "revealed")
# The seq of the poll a room shows (its code twice): the one set, else the latest (a room made before it was set).
SHOWN = "COALESCE((SELECT shown FROM rooms WHERE code = ?), (SELECT MAX(seq) FROM polls WHERE code = ?))"


class PollError(Exception):
    """Something a student or teacher should read: the message says what happened and what to do. Like
    ``attn_core``'s ``Problem``: a template with named values (``str()`` is the English), shown translated with
    ``dashboard.i18n.message``."""

    def __init__(self, msgid: str, /, **values: object):
        self.msgid = msgid
        self.values = values
        super().__init__(fill(msgid, values))


class NoSuchPoll(PollError):
    pass


class PollClosed(PollError):
    pass


class BadChoice(PollError):
    pass


class TooManyAnswers(PollError):
    pass


class NotTeacher(PollError):
    pass


class StoreDown(PollError):
    """The database cannot be reached (or failed): nothing was stored."""


@dataclass(frozen=True)
class Poll:
    """A room's current poll as a student or teacher sees it."""

    code: str
    seq: int
    question: dict  # attn_core.labs.questions.Question.to_dict()
    state: str  # "open" | "closed" | "revealed"
    expires: float


def normalize_code(code: str) -> str:
    """What a student typed, as stored: upper case, no spaces or dashes."""
    return "".join(c for c in str(code).upper() if c.isalnum())[:32]


def _hash(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def default_url() -> str:
    """``$ATTENTION_LAB_CLASS_DB``: a postgresql:// URL or a SQLite file path (default under ~/.cache)."""
    return os.environ.get(DB_ENV, "").strip() or str(DEFAULT_PATH)


def is_postgres(url: str) -> bool:
    return url.startswith(("postgresql://", "postgres://"))


class PollStore:
    """Polls and answers in SQLite (a path) or PostgreSQL (a URL). Thread-safe: one connection per store,
    one statement group at a time; a failed connection is opened again on the next call."""

    def __init__(self, url: str | None = None, clock: Callable[[], float] = time.time, connect_timeout: float = 3):
        self.url = url or default_url()
        self.postgres = is_postgres(self.url)
        self.clock, self.connect_timeout = clock, connect_timeout
        self._lock = threading.Lock()
        self._conn = None

    # -- connection and schema -------------------------------------------------------------------------------
    def _connect(self):
        if self.postgres:
            import psycopg

            return psycopg.connect(self.url, connect_timeout=max(1, int(self.connect_timeout)), autocommit=True)
        path = Path(self.url.removeprefix("sqlite:///"))
        path.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(path, timeout=10, isolation_level=None, check_same_thread=False)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA foreign_keys=ON")
        conn.execute("PRAGMA busy_timeout=10000")
        return conn

    def _sql(self, sql: str) -> str:
        return sql.replace("?", "%s") if self.postgres else sql

    @contextmanager
    def _tx(self) -> Iterator[Callable[..., list[tuple]]]:
        """One transaction; yields ``run(sql, *args) -> rows``. Database errors become :class:`StoreDown`."""
        with self._lock:
            try:
                if self._conn is None:
                    self._conn = self._connect()
                    self._migrate(self._conn)
                conn = self._conn
                if self.postgres:
                    with conn.transaction():
                        cur = conn.cursor()
                        yield lambda sql, *a: (cur.execute(self._sql(sql), a), cur.fetchall() if cur.description
                                                                                 else [])[1]
                else:
                    conn.execute("BEGIN IMMEDIATE")
                    try:
                        yield lambda sql, *a: conn.execute(sql, a).fetchall()
                        conn.execute("COMMIT")
                    except BaseException:
                        conn.execute("ROLLBACK")
                        raise
            except PollError:
                raise
            except Exception as e:  # sqlite3.Error, psycopg.Error, OSError: the store, not the input
                self._drop()
                raise StoreDown(N_("the class's answer store is not reachable ({error}): nothing was saved. Try "
                                   "again in a moment"), error=type(e).__name__) from e

    def _drop(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            try:
                conn.close()
            except Exception:  # noqa: S110 - it is broken already
                pass

    def _migrate(self, conn) -> None:
        """Create or upgrade the schema (under a lock every process honours)."""
        if self.postgres:
            with conn.transaction():
                conn.execute("SELECT pg_advisory_xact_lock(774242)")
                conn.execute("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)")
                self._apply(lambda sql, *a: conn.execute(self._sql(sql), a))
        else:
            conn.execute("BEGIN IMMEDIATE")
            try:
                conn.execute("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)")
                self._apply(lambda sql, *a: conn.execute(sql, a))
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise

    @staticmethod
    def _apply(run) -> None:
        rows = run("SELECT version FROM schema_version").fetchall()
        version = rows[0][0] if rows else 0
        for v in range(version, len(MIGRATIONS)):
            for stmt in MIGRATIONS[v]:
                run(stmt)
        if not rows:
            run("INSERT INTO schema_version (version) VALUES (?)", len(MIGRATIONS))
        elif version < len(MIGRATIONS):
            run("UPDATE schema_version SET version = ?", len(MIGRATIONS))

    def schema_version(self) -> int:
        with self._tx() as run:
            return int(run("SELECT version FROM schema_version")[0][0])

    def close(self) -> None:
        with self._lock:
            self._drop()

    # -- the teacher -----------------------------------------------------------------------------------------
    def create_room(self) -> tuple[str, str]:
        """A new room: (join code, teacher secret). Expired rooms are deleted on the way."""
        now = self.clock()
        secret = secrets.token_urlsafe(24)
        with self._tx() as run:
            run("DELETE FROM rooms WHERE expires < ?", now)
            run("DELETE FROM rate WHERE minute < ?", int(now // 60) - 1)
            while True:
                code = "".join(secrets.choice(CODE_ALPHABET) for _ in range(CODE_LENGTH))
                if not run("SELECT 1 FROM rooms WHERE code = ?", code):
                    break
            run("INSERT INTO rooms (code, secret_hash, created, expires) VALUES (?, ?, ?, ?)",
                code, _hash(secret), now, now + EXPIRY_S)
        return code, secret

    def _room(self, run, code: str, secret: str | None = None) -> None:
        rows = run("SELECT secret_hash, expires FROM rooms WHERE code = ?", code)
        if not rows or rows[0][1] < self.clock():
            raise NoSuchPoll(N_("there is no open poll with the code {code}: check the code on the screen (polls "
                                "end a few hours after the last question)"), code=code or "—")
        if secret is not None and not secrets.compare_digest(rows[0][0], _hash(secret)):
            raise NotTeacher(N_("only the teacher who opened this poll can change it"))

    def ask(self, code: str, secret: str, question: dict) -> int:
        """Put a new question to the room (closing the one before); its number. The code stays the same."""
        n = len(question.get("choices", ()))
        if not 2 <= n <= 8:
            raise BadChoice(N_("a question needs 2-8 choices; got {n}"), n=n)
        now = self.clock()
        with self._tx() as run:
            self._room(run, code, secret)
            seq = int(run("SELECT COALESCE(MAX(seq), 0) FROM polls WHERE code = ?", code)[0][0]) + 1
            run("UPDATE polls SET state = 'closed' WHERE code = ? AND state = 'open'", code)
            run("INSERT INTO polls (code, seq, question, n_choices, state, created) VALUES (?, ?, ?, ?, 'open', ?)",
                code, seq, json.dumps(question), n, now)
            run("UPDATE rooms SET expires = ?, shown = ? WHERE code = ?", now + EXPIRY_S, seq, code)
        return seq

    def reclaim(self, code: str, secret: str) -> Poll | None:
        """The teacher's room again, on any process (after its own one died): checks the secret (:class:`NotTeacher`
        when wrong, :class:`NoSuchPoll` when the room ended) and returns its current poll (None before the first
        question), so the panel is rebuilt from the store with the same code, numbering and tally."""
        code = normalize_code(code)
        with self._tx() as run:
            self._room(run, code, secret)
        return self.current(code)

    def set_state(self, code: str, secret: str, state: str) -> None:
        """Close or reveal the current poll (a revealed poll is closed too), or open it again."""
        if state not in STATES:
            raise ValueError(f"state must be one of {STATES}; got {state!r}")
        with self._tx() as run:
            self._room(run, code, secret)
            run(f"UPDATE polls SET state = ? WHERE code = ? AND seq = {SHOWN}", state, code, code, code)

    def delete_room(self, code: str, secret: str) -> None:
        with self._tx() as run:
            self._room(run, code, secret)
            run("DELETE FROM answers WHERE code = ?", code)
            run("DELETE FROM polls WHERE code = ?", code)
            run("DELETE FROM rooms WHERE code = ?", code)

    # -- everyone --------------------------------------------------------------------------------------------
    def current(self, code: str) -> Poll | None:
        """The poll the room shows (None before its first question); :class:`NoSuchPoll` for a bad code."""
        return self._poll(normalize_code(code), None)

    def poll(self, code: str, seq: int) -> Poll | None:
        """Poll ``seq`` of the room, shown or not (None when there is none)."""
        return self._poll(normalize_code(code), seq)

    def _poll(self, code: str, seq: int | None) -> Poll | None:
        with self._tx() as run:
            self._room(run, code)
            rows = (run(f"SELECT seq, question, state FROM polls WHERE code = ? AND seq = {SHOWN}", code, code, code)
                    if seq is None else run("SELECT seq, question, state FROM polls WHERE code = ? AND seq = ?", code,
                                            seq))
            expires = run("SELECT expires FROM rooms WHERE code = ?", code)[0][0]
        if not rows:
            return None
        return Poll(code, int(rows[0][0]), json.loads(rows[0][1]), rows[0][2], float(expires))

    def tally(self, code: str, seq: int) -> list[int]:
        """How many sessions chose each choice of poll ``seq`` (each session once)."""
        code = normalize_code(code)
        with self._tx() as run:
            n = run("SELECT n_choices FROM polls WHERE code = ? AND seq = ?", code, seq)
            if not n:
                raise NoSuchPoll(N_("question {seq} of {code} does not exist"), seq=seq, code=code)
            counts = [0] * int(n[0][0])
            for choice, count in run("SELECT choice, COUNT(*) FROM answers WHERE code = ? AND seq = ? "
                                     "GROUP BY choice", code, seq):
                counts[int(choice)] = int(count)
        return counts

    def answer(self, code: str, seq: int, session: str, choice: int) -> None:
        """Record (or change) one session's answer to poll ``seq``: counted once however often it is sent."""
        code = normalize_code(code)
        if not session or len(session) > 64:
            raise BadChoice(N_("this browser session has no id: reload the page"))
        now = self.clock()
        with self._tx() as run:
            self._room(run, code)
            rows = run(f"SELECT n_choices, state, {SHOWN} FROM polls WHERE code = ? AND seq = ?", code, code, code,
                       seq)
            if not rows:
                raise NoSuchPoll(N_("question {seq} of {code} does not exist: reload the page"), seq=seq, code=code)
            n, state, shown = rows[0]
            if state != "open" or seq != shown:
                raise PollClosed(N_("this question is closed: answers are no longer taken"))
            if not isinstance(choice, int) or not 0 <= choice < n:
                raise BadChoice(N_("choice {choice} is not one of this question's {n} choices"), choice=repr(choice),
                                n=n)
            minute = int(now // 60)
            run("INSERT INTO rate (session, minute, count) VALUES (?, ?, 1) ON CONFLICT (session, minute) "
                "DO UPDATE SET count = rate.count + 1", session, minute)
            if run("SELECT count FROM rate WHERE session = ? AND minute = ?", session, minute)[0][0] \
                    > RATE_PER_MINUTE:
                raise TooManyAnswers(N_("too many answers from this browser in a minute: wait a moment"))
            run("INSERT INTO answers (code, seq, session, choice, updated) VALUES (?, ?, ?, ?, ?) "
                "ON CONFLICT (code, seq, session) DO UPDATE SET choice = excluded.choice, updated = excluded.updated",
                code, seq, session, choice, now)

    def my_answer(self, code: str, seq: int, session: str) -> int | None:
        """This browser's answer to poll ``seq`` (None when it has not answered): a reloaded page shows it."""
        with self._tx() as run:
            rows = run("SELECT choice FROM answers WHERE code = ? AND seq = ? AND session = ?",
                       normalize_code(code), seq, session)
        return int(rows[0][0]) if rows else None
