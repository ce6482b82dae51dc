"""`wfctl ui`'s process: the App on a socket (the standard library's HTTP server, a small pool of
threads), the one watcher that notices commits for every open page, and a clean stop on
SIGINT/SIGTERM."""

from __future__ import annotations

import ipaddress
import logging
import signal
import socket
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import TYPE_CHECKING, Any, TextIO

from wfctl.client import Client
from wfctl.errors import WfctlError

if TYPE_CHECKING:
    from wfctl.ui.app import App

# How often the watcher looks at the database: data_version costs microseconds on SQLite and
# one short query on PostgreSQL, whose notifications wake it sooner.
WATCH_INTERVAL = 0.2
# Threads answering requests; each keeps its own SQLite connection from one request to the next.
THREADS = 8
log = logging.getLogger("wfctl.ui")


class Watcher:
    """One thread per server that notices commits (data_version, and on PostgreSQL the store's
    notifications), so that open pages ask it, not the database, whether to look again."""

    def __init__(self, client: Client, interval: float = WATCH_INTERVAL) -> None:
        self.client = client
        self.interval = interval
        self.version = 0
        self.error: str | None = None
        # Set once the watcher has read the database's version: changes from then on count.
        self.ready = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="wfctl-ui-watcher", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def changes(self) -> dict[str, Any]:
        """What `/api/changes` answers: a number that moves when the database changed."""
        return {"version": self.version, "error": self.error}

    def _run(self) -> None:
        store = self.client.store
        listener = None
        seen = None
        while not self._stop.is_set():
            try:
                if listener is None:
                    listener = store.listen()
                if listener is not None:
                    listener.wait(self.interval)
                else:
                    self._stop.wait(self.interval)
                current = store.data_version()
                if current != seen:
                    if seen is not None:
                        self.version += 1
                    seen = current
                self.ready.set()
                if self.error is not None:
                    log.warning("the database answers again")
                self.error = None
            except WfctlError as exc:
                if self.error is None:
                    log.error("cannot watch the database: %s", exc)
                self.error = str(exc)
                self._stop.wait(1.0)
        if listener is not None:
            listener.close()


class _Server(HTTPServer):
    """HTTPServer whose requests run on a fixed pool of threads (not one new thread each)."""

    daemon_threads = True

    app: App

    def __init__(self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler],
                 family: int) -> None:
        self.address_family = family
        self.pool = ThreadPoolExecutor(THREADS, thread_name_prefix="wfctl-ui")
        super().__init__(address, handler)

    def process_request(self, request: Any, client_address: Any) -> None:
        self.pool.submit(self._answer, request, client_address)

    def _answer(self, request: Any, client_address: Any) -> None:
        try:
            self.finish_request(request, client_address)
        except Exception:
            self.handle_error(request, client_address)
        finally:
            self.shutdown_request(request)

    def handle_error(self, request: Any, client_address: Any) -> None:
        log.exception("request from %s failed", client_address[0])

    def server_close(self) -> None:
        super().server_close()
        self.pool.shutdown(wait=False, cancel_futures=True)


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    server_version = "wfctl-ui"
    sys_version = ""
    # Requests larger than this (a form is a few hundred bytes) are refused unread.
    MAX_BODY = 64 * 1024
    # A client that connects and says nothing gives its thread back after this many seconds.
    timeout = 30

    def _serve(self) -> None:
        started = time.perf_counter()
        length = int(self.headers.get("Content-Length") or 0)
        if length > self.MAX_BODY:
            self.send_error(413)
            return
        body = self.rfile.read(length) if length > 0 else b""
        try:
            response = self.server.app.handle(self.command, self.path,
                                              dict(self.headers.items()), body)
        except Exception:
            from wfctl.ui.app import SECURITY_HEADERS, Response

            log.exception("%s %s failed", self.command, self.path.partition("?")[0])
            response = Response(500, b"internal error: the server's log has the details\n",
                                "text/plain; charset=utf-8", list(SECURITY_HEADERS))
        self.send_response(response.status)
        self.send_header("Content-Type", response.content_type)
        self.send_header("Content-Length", str(len(response.body)))
        for name, value in response.headers:
            self.send_header(name, value)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(response.body)
        # The path only: a query may hold the token.
        log.info("%s %s %s %d %.1fms", self.client_address[0], self.command,
                 self.path.partition("?")[0], response.status,
                 (time.perf_counter() - started) * 1000)

    do_GET = do_HEAD = do_POST = do_PUT = do_DELETE = do_PATCH = do_OPTIONS = _serve

    def log_message(self, format: str, *args: Any) -> None:
        """The server's own lines (a malformed request) go to the log without the request
        line's query."""
        log.info("%s %s", self.client_address[0], format % args if args else format)

    def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
        """Each request is logged once, by _serve."""


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def serve(client: Client, *, host: str, port: int, allow_actions: bool, token: str | None,
          database: str, open_browser: bool = False, out: TextIO = sys.stdout) -> None:
    """Serve until SIGINT or SIGTERM; prints the address once it listens."""
    watcher = Watcher(client)
    bare = host.strip("[]")
    family = socket.AF_INET6 if ":" in bare else socket.AF_INET
    server = _Server((bare, port), _Handler, family)
    bound = server.server_address[1]
    shown = f"[{bare}]" if family == socket.AF_INET6 else bare
    url = f"http://{shown}:{bound}/"

    def stop(signum: int, frame: Any) -> None:
        # shutdown() waits for serve_forever to return: it must not run on its thread.
        threading.Thread(target=server.shutdown, daemon=True).start()

    previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGINT, signal.SIGTERM)}
    out.write(f"wfctl ui: {url} ({'actions allowed' if allow_actions else 'read-only'}; "
              f"database {database}; Ctrl-C stops)\n")
    if token is not None:
        out.write(f"open {url}?token=… with the token of WFCTL_UI_TOKEN\n")
    out.flush()
    # Listening already: what comes before the templates are ready waits in the backlog.
    from wfctl.ui.app import App

    server.app = App(client, allow_actions=allow_actions, token=token,
                     hosts=App.loopback_hosts(bound) if is_loopback(host) else None,
                     changes=watcher.changes, database=database)
    watcher.start()
    threading.Thread(target=server.app.warm, name="wfctl-ui-warm", daemon=True).start()
    if open_browser:
        import webbrowser

        threading.Thread(target=webbrowser.open, args=(url,), daemon=True).start()
    try:
        server.serve_forever(poll_interval=0.2)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        server.server_close()
        watcher.stop()
        out.write("wfctl ui: stopped\n")
        out.flush()
