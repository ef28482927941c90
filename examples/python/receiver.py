"""A runnable apply-once webhook receiver for oncejob's relay, on
oncejob.receiver: the Python twin of examples/receiver (Go). Its effect is a
row in receiver_effects per event it applies - deliberately without a
unique key of its own, so that only the inbox keeps a second delivery from
applying twice, and a test can count.

    WEBHOOK_SECRETS=whsec_... PYTHONPATH=clientsdk/python \\
        python3 examples/python/receiver.py --addr 127.0.0.1:8080 --sqlite ./receiver.db
    WEBHOOK_SECRETS=whsec_... PYTHONPATH=clientsdk/python \\
        python3 examples/python/receiver.py --database-url postgresql://postgres@127.0.0.1/postgres

WEBHOOK_SECRETS holds the sink's secret, or the new and the old one
separated by a space while a secret rotates. --database-url needs psycopg2
(Debian: python3-psycopg2).
"""
import argparse
import datetime
import os
import signal
import socketserver
import sys
import threading
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer

from oncejob.receiver import DBAPIInbox, SQLiteInbox, Verifier, WSGIHandler

EFFECTS = """CREATE TABLE IF NOT EXISTS receiver_effects (
    id          INTEGER PRIMARY KEY {},
    event_id    TEXT NOT NULL,
    event_type  TEXT NOT NULL,
    job_id      TEXT NOT NULL,
    status      TEXT NOT NULL,
    applied_at  TEXT NOT NULL
)"""


def effect(placeholder):
    sql = ("INSERT INTO receiver_effects (event_id, event_type, job_id, status, applied_at) "
           f"VALUES ({', '.join([placeholder] * 5)}) RETURNING id")

    def apply(cur, event):
        now = datetime.datetime.now(datetime.timezone.utc).isoformat()
        cur.execute(sql, (event.id, event.type, event.data.get("job_id") or "", event.data.get("status") or "", now))
        return f"effect-{cur.fetchone()[0]}"
    return apply


def open_inbox(args):
    if args.database_url:
        import psycopg2
        inbox = DBAPIInbox(lambda: psycopg2.connect(args.database_url), effect("%s"),
                           max_connections=args.max_connections)
        identity = "GENERATED ALWAYS AS IDENTITY"
    elif args.sqlite:
        inbox = SQLiteInbox(args.sqlite, effect("?"), max_connections=args.max_connections)
        identity = "AUTOINCREMENT"
    else:
        sys.exit("set --database-url or --sqlite")
    # The effects table through a connection of the inbox's own pool.
    with inbox.connection() as conn:
        conn.cursor().execute(EFFECTS.format(identity))
        conn.commit()
    inbox.create_table()
    return inbox


class Server(socketserver.ThreadingMixIn, WSGIServer):
    daemon_threads = True
    # The listen backlog: connections the kernel holds until the accept
    # loop takes them. socketserver's default of 5 reset deliveries when 50
    # arrived at once; the relay may send a thousand (Linux caps it at
    # net.core.somaxconn, 4096 by default).
    request_queue_size = 1024


class Quiet(WSGIRequestHandler):
    def log_message(self, *args):
        pass


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--addr", default="127.0.0.1:8080", help="listen address")
    p.add_argument("--database-url", help="Postgres URL of the receiver's own database")
    p.add_argument("--sqlite", help="SQLite file of the receiver's own database, when no --database-url")
    p.add_argument("--max-connections", type=int, default=10,
                   help="database connections the receiver opens at most (deliveries beyond wait for one)")
    args = p.parse_args()
    try:
        verifier = Verifier(*os.environ.get("WEBHOOK_SECRETS", "").split())
    except ValueError as e:
        sys.exit(f"WEBHOOK_SECRETS: {e}")
    inbox = open_inbox(args)
    host, _, port = args.addr.rpartition(":")
    server = Server((host, int(port)), Quiet)
    server.set_app(WSGIHandler(verifier, inbox))
    print(f"receiver listening on {host}:{server.server_port}", file=sys.stderr, flush=True)
    signal.signal(signal.SIGTERM, lambda *_: threading.Thread(target=server.shutdown).start())
    try:
        server.serve_forever()
    finally:
        server.server_close()
        inbox.close()


if __name__ == "__main__":
    main()
