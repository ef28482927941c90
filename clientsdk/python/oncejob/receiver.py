"""Apply oncejob's events once: the Python twin of the Go clientsdk/receiver.

The relay delivers every event at least once - a retry after a lost answer,
a relay killed after the send - so a receiver must tell a second delivery
from a first. It does so the one way that holds under crashes: the caller's
effect and an inbox row keyed by the event id commit in one transaction of
the receiver's own database; a second delivery finds the row, runs nothing,
and is answered 200 with the first one's receipt (docs/architecture.md,
"Receivers").

    from oncejob.receiver import Verifier, SQLiteInbox, WSGIHandler

    def effect(cur, event):            # runs in the inbox row's transaction
        cur.execute("INSERT INTO invoices (job_id) VALUES (?)", (event.data["job_id"],))
        return f"invoice-{cur.lastrowid}"  # the receipt, journaled by the relay

    verifier = Verifier(os.environ["WEBHOOK_SECRET"])  # new and old while rotating
    inbox = SQLiteInbox("receiver.db", effect)
    inbox.create_table()
    app = WSGIHandler(verifier, inbox)  # or ASGIHandler; or handle() in any framework

Webhooks are verified per Standard Webhooks 1.0: v1 HMAC-SHA256 of
"id.timestamp.body" with the whsec_ secret, compared in constant time, any
of several space-separated signatures, any of several secrets while one
rotates, and a timestamp within 5 minutes of now. Postgres (or any DB-API
2.0 driver) works through DBAPIInbox. Only the standard library is used.
"""
import asyncio
import base64
import binascii
import hashlib
import hmac
import inspect
import json
import math
import re
import sqlite3
import sys
import threading
import time
from collections.abc import Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Callable, List, Optional, Tuple

__all__ = [
    "TOLERANCE", "RECEIPT_HEADER", "MAX_BODY", "DEFAULT_INBOX_TABLE", "VerificationError", "MissingHeadersError",
    "StaleError", "SignatureError", "EventError", "Verifier", "Event", "parse_event", "DBAPIInbox", "SQLiteInbox",
    "Response", "handle", "DEFAULT_MAX_CONNECTIONS", "handle_async", "WSGIHandler", "ASGIHandler",
]

TOLERANCE = 300
"""How far, in seconds, a webhook's timestamp may be from now."""

RECEIPT_HEADER = "Webhook-Receipt"
"""Carries the receipt back to the relay, which journals it as the delivery's external reference."""

MAX_BODY = 16 << 20
"""The largest request body read."""

DEFAULT_INBOX_TABLE = "oncejob_inbox"


class VerificationError(Exception):
    """A request that is not a verified webhook: answered 401."""


class MissingHeadersError(VerificationError):
    def __init__(self):
        super().__init__("receiver: webhook-id, webhook-timestamp and webhook-signature are required")


class StaleError(VerificationError):
    def __init__(self):
        super().__init__("receiver: webhook-timestamp is more than 5 minutes from now")


class SignatureError(VerificationError):
    def __init__(self):
        super().__init__("receiver: no signature matches")


class EventError(ValueError):
    """A body that is not an oncejob event: answered 400."""


# JavaScript's parseInt(s, 10), as the Standard Webhooks library reads a
# timestamp: leading white space (of a header's bytes as Node reads them,
# one Latin-1 character a byte), a sign, the ASCII digits up to the first
# other character.
_TIMESTAMP = re.compile(rb"[\t\n\v\f\r \xa0]*([+-]?[0-9]+)")
_INT64 = (-(1 << 63), (1 << 63) - 1)
_INT32 = (-(1 << 31), (1 << 31) - 1)


def _decode_secret(i: int, secret: str) -> bytes:
    if not isinstance(secret, str) or not secret.startswith("whsec_"):
        raise ValueError(f"receiver: secret {i}: want whsec_ and base64")
    try:
        try:
            key = binascii.a2b_base64(secret[len("whsec_"):].encode("ascii"), strict_mode=True)
        except TypeError:  # Python < 3.11: no strict mode
            key = base64.b64decode(secret[len("whsec_"):], validate=True)
    except (binascii.Error, ValueError) as e:
        raise ValueError(f"receiver: secret {i}: {e}") from None
    if not key:
        raise ValueError(f"receiver: secret {i}: webhook secret may not be empty")
    return key


def _raw(value) -> bytes:
    """A header value's bytes. Servers hand headers over as latin-1 text
    (WSGI, http.server) or bytes (ASGI); latin-1 gives back the bytes sent."""
    if isinstance(value, (bytes, bytearray)):
        return bytes(value)
    try:
        return value.encode("latin-1")
    except UnicodeEncodeError:
        return value.encode("utf-8")


def _header(headers, name: str) -> bytes:
    """A header's value by case-insensitive name, as the Standard Webhooks
    library meets it in Node: from a list of (name, value) lines (ASGI) or a
    message with get_all (http.server), its lines joined by ", " (RFC 9110
    5.3, as Node's http server combines them); from a dict, the value of
    the last key that matches (as the library lower-cases a headers
    object). A WSGI server combines lines itself before the application
    sees them (wsgiref and gunicorn with ","; docs/architecture.md,
    "Receivers")."""
    if isinstance(headers, dict):
        found = None
        for key, value in headers.items():
            k = key.decode("latin-1") if isinstance(key, (bytes, bytearray)) else key
            if k.lower() == name and value is not None:
                found = _raw(value)
        return found or b""
    if hasattr(headers, "get_all"):
        return b", ".join(_raw(v) for v in headers.get_all(name) or [])
    items = headers.items() if isinstance(headers, Mapping) or hasattr(headers, "items") else headers
    lines = []
    for key, value in items:
        k = key.decode("latin-1") if isinstance(key, (bytes, bytearray)) else key
        if k.lower() == name and value is not None:
            lines.append(_raw(value))
    return b", ".join(lines)


class Verifier:
    """Checks Standard Webhooks signatures.

    secrets are the sink's secrets (whsec_ + base64). During a rotation pass
    both, new first: a request signed with either is accepted. now is the
    clock (seconds since the epoch) a timestamp is compared with; tests fix it.
    """

    def __init__(self, *secrets: str, now: Callable[[], float] = time.time):
        if not secrets:
            raise ValueError("receiver: at least one secret is required")
        self._keys = [_decode_secret(i, s) for i, s in enumerate(secrets, 1)]
        self.now = now

    def verify(self, headers, body: bytes) -> None:
        """Raises MissingHeadersError, StaleError or SignatureError unless the
        timestamp is within TOLERANCE of now and any signature is of any
        secret - exactly as the Standard Webhooks reference library (npm
        standardwebhooks) and the Go receiver decide: a header on several
        lines is its lines joined by ", "; the timestamp is what
        JavaScript's parseInt reads ("<now>.0" is now), compared with now
        in whole seconds; the signature header is split at each space."""
        msg_id = _header(headers, "webhook-id")
        ts = _header(headers, "webhook-timestamp")
        sigs = _header(headers, "webhook-signature")
        if not msg_id or not ts or not sigs:
            raise MissingHeadersError()
        m = _TIMESTAMP.match(ts)
        if not m:
            raise MissingHeadersError()
        digits = m.group(1)
        # Past int64 it is stale either way; clamped as Go's receiver does
        # (and before int() meets a number of thousands of digits).
        secs = int(digits) if len(digits) <= 20 else (-1 if digits[:1] == b"-" else 1) * _INT64[1]
        secs = max(min(secs, _INT64[1]), -_INT64[1])
        now = math.floor(self.now())
        if now - secs > TOLERANCE or secs > now + TOLERANCE:
            raise StaleError()
        if isinstance(body, str):
            body = body.encode("utf-8")
        signed = b"%s.%d.%s" % (msg_id, secs, bytes(body))
        candidates = sigs.split(b" ")
        for key in self._keys:
            expected = b"v1," + base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest())
            # Every candidate is compared, in constant time, as the library does.
            if any([hmac.compare_digest(c, expected) for c in candidates]):
                return
        raise SignatureError()


@dataclass(frozen=True)
class Event:
    """An oncejob event: envelope version 1 (docs/architecture.md, "Events").

    id is stable per (job, type, generation): the inbox key. data holds the
    job's fields (job_id, tenant, pipeline, status, output, error, usage...).
    """
    version: int
    type: str
    id: str
    time: str
    data: dict = field(default_factory=dict)


# The envelope's fields and their types, as the Go receiver's Event struct
# declares them: encoding/json refuses a value of another type, keeps a
# null's zero value, ignores unknown fields and matches names regardless of
# case; parse_event does the same, so both receivers refuse the same bodies.
_STR, _BOOL, _ANY = "string", "bool", "any"
_DATA = {
    "job_id": _STR, "tenant": _STR, "pipeline": _STR, "pipeline_version": _INT32, "prompt_version": _STR,
    "model_profile": _STR, "dedup_key": _STR, "deduplicated_from": _STR, "generation": _INT64, "status": _STR,
    "stage": _STR, "attempt": _INT32, "output": _ANY,
    "error": {"code": _STR, "message": _STR, "retryable": _BOOL},
    "usage": {"prompt_tokens": _INT64, "completion_tokens": _INT64, "cost_micros": _INT64, "llm_calls": _INT32},
}
_ENVELOPE = {"version": _INT64, "type": _STR, "id": _STR, "time": _STR, "data": _DATA}


class _Pairs(list):
    """A JSON object as its (key, value) pairs in order, duplicates kept."""


def _field(kind: dict, key: str) -> Optional[str]:
    if key in kind:
        return key
    # Go's case folding: K and the Kelvin sign are k, the long s is s.
    for name in kind:
        if len(name) == len(key) and all(a == b or a.casefold() == b for a, b in zip(key, name)):
            return name
    return None


def _check(value, kind, path: str):
    """Returns value as plain Python (objects as dicts, the last of equal
    keys winning) after checking the declared fields' types."""
    if isinstance(value, _Pairs):
        if isinstance(kind, dict) or kind is _ANY:
            out = {}
            for k, v in value:
                name = _field(kind, k) if isinstance(kind, dict) else None
                out[name or k] = _check(v, kind[name] if name else _ANY, f"{path}.{k}")
            return out
    elif isinstance(value, list) and kind is _ANY:
        return [_check(v, _ANY, path) for v in value]
    elif value is None or kind is _ANY:
        return value
    elif kind is _STR and isinstance(value, str) or kind is _BOOL and isinstance(value, bool):
        return value
    elif isinstance(kind, tuple) and isinstance(value, int) and not isinstance(value, bool) \
            and kind[0] <= value <= kind[1]:
        return value
    raise EventError(f"receiver: event: {path}: cannot take {json.dumps(value)[:40]}")


def _refuse_constant(name):
    raise ValueError(f"{name} is not JSON")


def parse_event(body: bytes) -> Event:
    """Reads an envelope; raises EventError unless it is version 1 with an id and a type."""
    try:
        # Invalid UTF-8 becomes U+FFFD, as encoding/json does.
        text = bytes(body).decode("utf-8", errors="replace")
        doc = json.loads(text, object_pairs_hook=_Pairs, parse_constant=_refuse_constant)
    except (ValueError, RecursionError) as e:
        raise EventError(f"receiver: event: {e}") from None
    if doc is not None and not isinstance(doc, _Pairs):
        raise EventError("receiver: event: want a JSON object")
    env = _check(doc, _ENVELOPE, "") if doc is not None else {}
    version = env.get("version") or 0
    if version != 1 or not env.get("id") or not env.get("type"):
        raise EventError(f"receiver: event: want envelope version 1 with id and type, got version {version}")
    return Event(version=1, type=env["type"], id=env["id"], time=env.get("time") or "", data=env.get("data") or {})


_TABLE = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,62}", re.ASCII)


def _check_table(table: str) -> str:
    table = table or DEFAULT_INBOX_TABLE
    if not isinstance(table, str) or not _TABLE.fullmatch(table):
        raise ValueError(f"receiver: inbox table {table!r}: want a plain identifier")
    return table


def _statements(table: str, paramstyle: str):
    """The inbox's statements for a table (a checked identifier) and a
    DB-API paramstyle, and how each binds its values."""
    if paramstyle == "qmark":
        p_id, p_receipt = "?", "?"
    elif paramstyle == "numeric":
        p_id, p_receipt = ":1", ":2"
    elif paramstyle == "named":
        p_id, p_receipt = ":event_id", ":receipt"
    elif paramstyle == "format":
        p_id, p_receipt = "%s", "%s"
    elif paramstyle == "pyformat":
        p_id, p_receipt = "%(event_id)s", "%(receipt)s"
    else:
        raise ValueError(f"receiver: paramstyle {paramstyle!r}: want qmark, numeric, named, format or pyformat")
    create = (f"CREATE TABLE IF NOT EXISTS {table} (event_id text PRIMARY KEY, receipt text NOT NULL DEFAULT '', "
              "applied_at timestamp NOT NULL DEFAULT CURRENT_TIMESTAMP)")
    insert = f"INSERT INTO {table} (event_id) VALUES ({p_id}) ON CONFLICT DO NOTHING"
    receipt = f"SELECT receipt FROM {table} WHERE event_id = {p_id}"
    update = f"UPDATE {table} SET receipt = {p_receipt} WHERE event_id = {p_id}"
    if paramstyle in ("named", "pyformat"):
        def bind(event_id, receipt=None):
            return {"event_id": event_id, "receipt": receipt}
    elif paramstyle == "numeric":
        def bind(event_id, receipt=None):
            return (event_id,) if receipt is None else (event_id, receipt)
    else:  # positional in the order of the text: the update names the receipt first
        def bind(event_id, receipt=None):
            return (event_id,) if receipt is None else (receipt, event_id)
    return create, insert, receipt, update, bind


Effect = Callable[[Any, Event], str]


DEFAULT_MAX_CONNECTIONS = 10
"""How many database connections an inbox opens at most, unless told."""


class DBAPIInbox:
    """Applies events once through any DB-API 2.0 driver (psycopg2 for
    Postgres, sqlite3, ...), with INSERT ... ON CONFLICT DO NOTHING.

    connect returns a new connection (e.g. lambda: psycopg2.connect(dsn)).
    The inbox keeps a pool of at most max_connections of them, shared by
    every thread: a delivery borrows one for its transaction and gives it
    back, so a threaded server answering a thousand deliveries at once holds
    max_connections, not one per thread (a Postgres role's CONNECTION LIMIT,
    a process's file descriptors). A delivery that finds none free within
    wait seconds raises TimeoutError: a 500, and the relay retries. A
    connection that fails to roll back is closed, not reused; close() closes
    them all.

    effect(cursor, event) runs the effect on the cursor, in the transaction
    of the inbox row, and returns the receipt. The inbox insert is first in
    the transaction: on Postgres a concurrent delivery of the same event
    waits on the primary key and, once the first commits, inserts nothing
    and returns the first's receipt. paramstyle is the driver module's
    unless given.
    """

    def __init__(self, connect: Callable[[], Any], effect: Effect, table: str = DEFAULT_INBOX_TABLE,
                 paramstyle: Optional[str] = None, max_connections: int = DEFAULT_MAX_CONNECTIONS,
                 wait: float = 30.0):
        self._table = _check_table(table)
        if isinstance(max_connections, bool) or not isinstance(max_connections, int) or max_connections < 1:
            raise ValueError(f"receiver: max_connections {max_connections!r}: want an int >= 1")
        self._connect, self._effect, self._paramstyle = connect, effect, paramstyle
        if paramstyle is not None:
            _statements(self._table, paramstyle)  # refuses an unknown style now
        self._max, self._wait = max_connections, wait
        self._cond = threading.Condition()
        self._idle: List[Any] = []  # last in, first out: the warmest first
        self._open = 0  # idle and lent
        self._closed = False
        self._sql = None

    @property
    def open_connections(self) -> int:
        """How many connections the pool holds now, idle and lent."""
        with self._cond:
            return self._open

    def _acquire(self):
        deadline = time.monotonic() + self._wait
        with self._cond:
            while True:
                if self._closed:
                    raise RuntimeError("receiver: the inbox is closed")
                if self._idle:
                    return self._idle.pop()
                if self._open < self._max:
                    self._open += 1
                    break
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"receiver: no database connection free within {self._wait:g}s "
                                       f"({self._max} in use)")
                self._cond.wait(left)
        try:
            conn = self._connect()
            if self._sql is None:
                style = self._paramstyle or _driver_paramstyle(conn)
                with self._cond:
                    if self._sql is None:
                        self._sql = _statements(self._table, style)
        except BaseException:
            with self._cond:
                self._open -= 1
                self._cond.notify()
            raise
        return conn

    def _release(self, conn, broken: bool = False):
        with self._cond:
            keep = not broken and not self._closed
            if keep:
                self._idle.append(conn)
            else:
                self._open -= 1
            self._cond.notify()
        if not keep:
            _close_quietly(conn)

    @contextmanager
    def connection(self):
        """Lends a connection of the pool for the with block, for setting up
        the effect's own tables beside the inbox; commit in the block. It is
        rolled back and given back after it (closed if that fails)."""
        conn = self._acquire()
        broken = False
        try:
            yield conn
        finally:
            broken = not self._rollback(conn)
            self._release(conn, broken)

    def _begin(self, cur):
        """Starts the transaction; DB-API drivers start one on their own."""

    def create_table(self) -> None:
        """Creates the inbox table if it does not exist."""
        with self.connection() as conn:
            cur = conn.cursor()
            try:
                self._begin(cur)
                cur.execute(self._sql[0])
                conn.commit()
            finally:
                cur.close()

    def apply(self, event: Event) -> Tuple[str, bool]:
        """Runs the effect once per event id: (receipt, applied). applied is
        False when the event had been applied before (nothing ran now); the
        receipt is the same on every delivery."""
        conn = self._acquire()
        broken = False
        _, insert, select, update, bind = self._sql
        cur = None
        try:
            cur = conn.cursor()
            self._begin(cur)
            cur.execute(insert, bind(event.id))
            if cur.rowcount == 0:
                cur.execute(select, bind(event.id))
                row = cur.fetchone()
                if row is None:
                    raise RuntimeError(f"receiver: inbox row of {event.id} vanished")
                conn.commit()
                return row[0], False
            receipt = self._effect(cur, event)
            if not isinstance(receipt, str):
                raise TypeError(f"receiver: the effect returned {type(receipt).__name__}, want a str receipt")
            cur.execute(update, bind(event.id, receipt))
            conn.commit()
            return receipt, True
        except BaseException:
            broken = not self._rollback(conn)
            raise
        finally:
            if cur is not None:
                _close_quietly(cur)
            self._release(conn, broken)

    async def apply_async(self, event: Event) -> Tuple[str, bool]:
        """apply on a worker thread, for asyncio callers."""
        return await asyncio.to_thread(self.apply, event)

    @staticmethod
    def _rollback(conn) -> bool:
        """Rolls back; False when the connection cannot, and must not be reused."""
        try:
            conn.rollback()
            return True
        except Exception:  # noqa: BLE001 - a broken connection is dropped
            return False

    def close(self) -> None:
        """Closes the pool's connections: the idle ones now, the lent ones
        when they come back. The inbox applies nothing after it."""
        with self._cond:
            self._closed = True
            idle, self._idle = self._idle, []
            self._open -= len(idle)
            self._cond.notify_all()
        for c in idle:
            _close_quietly(c)


def _close_quietly(resource):
    try:
        resource.close()
    except Exception:  # noqa: BLE001 - it may be gone already
        pass


def _driver_paramstyle(conn) -> str:
    module = sys.modules.get(type(conn).__module__.partition(".")[0])
    style = getattr(module, "paramstyle", None)
    if style is None:
        raise ValueError(f"receiver: cannot tell the paramstyle of {type(conn).__module__}: pass paramstyle=")
    return style


class SQLiteInbox(DBAPIInbox):
    """Applies events once in a SQLite file through the standard library's
    sqlite3: WAL, a busy timeout, and BEGIN IMMEDIATE, so that a second
    process on the same file waits for the first's transaction rather than
    failing. A pool of at most max_connections connections, as DBAPIInbox."""

    def __init__(self, path, effect: Effect, table: str = DEFAULT_INBOX_TABLE, timeout: float = 10.0,
                 max_connections: int = DEFAULT_MAX_CONNECTIONS):
        def connect():
            conn = sqlite3.connect(str(path), timeout=timeout, isolation_level=None, check_same_thread=False)
            conn.execute("PRAGMA journal_mode=WAL")
            return conn
        super().__init__(connect, effect, table, paramstyle="qmark", max_connections=max_connections)

    def _begin(self, cur):
        cur.execute("BEGIN IMMEDIATE")


Response = Tuple[int, List[Tuple[str, str]], bytes]
"""An HTTP answer: status, headers, body."""


def _error(status: int, message: str) -> Response:
    # As Go's http.Error writes it.
    return status, [("Content-Type", "text/plain; charset=utf-8"), ("X-Content-Type-Options", "nosniff")], \
        (message + "\n").encode("utf-8")


def _prepare(verifier: Verifier, method: str, headers, body) -> Tuple[Optional[Event], Optional[Response]]:
    if method != "POST":
        return None, _error(405, "POST only")
    if isinstance(body, Exception):
        return None, _error(400, f"body: {body}")
    try:
        verifier.verify(headers, body)
    except VerificationError as e:
        return None, _error(401, str(e))
    try:
        event = parse_event(body)
    except EventError:
        event = None
    if event is None or event.id.encode("utf-8", "surrogatepass") != _header(headers, "webhook-id"):
        return None, _error(400, "not an oncejob event, or its id is not the webhook-id")
    return event, None


def _answer(receipt: str, applied: bool) -> Response:
    # As Go's json.Encoder writes it: compact, HTML-safe, a newline.
    body = json.dumps({"applied": applied, "receipt": receipt}, separators=(",", ":"), ensure_ascii=False)
    for c, esc in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026"), ("\u2028", "\\u2028"), ("\u2029", "\\u2029")):
        body = body.replace(c, esc)
    return 200, [(RECEIPT_HEADER, receipt), ("Content-Type", "application/json")], (body + "\n").encode("utf-8")


def handle(verifier: Verifier, inbox, method: str, headers, body) -> Response:
    """Serves one webhook delivery in any framework: verify (401 when it
    fails), parse (400), apply once (500 when the effect fails, so the relay
    retries), and 200 with the receipt - also for an event applied before,
    so the relay stops sending it. body is the request's bytes, or the
    exception that reading it raised (400)."""
    event, refused = _prepare(verifier, method, headers, body)
    if refused:
        return refused
    try:
        receipt, applied = inbox.apply(event)
    except Exception as e:  # noqa: BLE001 - any failure of the effect is a 500 and a retry
        return _error(500, f"apply: {e}")
    return _answer(receipt, applied)


async def handle_async(verifier: Verifier, inbox, method: str, headers, body) -> Response:
    """handle for asyncio: the inbox's apply_async, or its apply if that is
    a coroutine function, or its apply on a worker thread."""
    event, refused = _prepare(verifier, method, headers, body)
    if refused:
        return refused
    try:
        apply = getattr(inbox, "apply_async", None)
        if apply is not None:
            receipt, applied = await apply(event)
        elif inspect.iscoroutinefunction(inbox.apply):
            receipt, applied = await inbox.apply(event)
        else:
            receipt, applied = await asyncio.to_thread(inbox.apply, event)
    except Exception as e:  # noqa: BLE001
        return _error(500, f"apply: {e}")
    return _answer(receipt, applied)


class _TooLarge(Exception):
    def __init__(self):
        super().__init__("http: request body too large")


_REASONS = {200: "OK", 400: "Bad Request", 401: "Unauthorized", 405: "Method Not Allowed",
            500: "Internal Server Error"}


class WSGIHandler:
    """A WSGI application serving webhook deliveries with handle."""

    def __init__(self, verifier: Verifier, inbox):
        self.verifier, self.inbox = verifier, inbox

    def __call__(self, environ, start_response):
        headers = {k[5:].replace("_", "-").lower(): v for k, v in environ.items() if k.startswith("HTTP_")}
        status, out_headers, body = handle(self.verifier, self.inbox, environ.get("REQUEST_METHOD", ""), headers,
                                           self._body(environ))
        start_response(f"{status} {_REASONS[status]}", out_headers + [("Content-Length", str(len(body)))])
        return [body]

    @staticmethod
    def _body(environ):
        try:
            length = int(environ.get("CONTENT_LENGTH") or 0)
        except ValueError as e:
            return e
        if length > MAX_BODY:
            return _TooLarge()
        try:
            return environ["wsgi.input"].read(length) if length > 0 else b""
        except OSError as e:
            return e


class ASGIHandler:
    """An ASGI 3 application serving webhook deliveries with handle_async."""

    def __init__(self, verifier: Verifier, inbox):
        self.verifier, self.inbox = verifier, inbox

    async def __call__(self, scope, receive, send):
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                elif message["type"] == "lifespan.shutdown":
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        if scope["type"] != "http":
            raise ValueError(f"receiver: ASGI scope {scope['type']!r}: want http")
        body = await self._body(receive)
        status, headers, out = await handle_async(self.verifier, self.inbox, scope["method"], scope["headers"], body)
        headers = headers + [("Content-Length", str(len(out)))]
        await send({"type": "http.response.start", "status": status,
                    "headers": [(k.lower().encode("latin-1"), v.encode("latin-1", "replace")) for k, v in headers]})
        await send({"type": "http.response.body", "body": out})

    @staticmethod
    async def _body(receive):
        chunks, size = [], 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return ConnectionError("client disconnected")
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > MAX_BODY:
                return _TooLarge()
            chunks.append(chunk)
            if not message.get("more_body", False):
                return b"".join(chunks)
