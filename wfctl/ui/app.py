"""Requests to responses: the routes of the web view, its security checks and its actions, with no
socket in sight (the server feeds it; tests call it directly)."""

from __future__ import annotations

import hmac
import json
import secrets
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from importlib import resources
from typing import Any
from urllib.parse import parse_qs, quote, unquote, urlencode, urlsplit

from jinja2 import Environment, FileSystemLoader, select_autoescape

from wfctl import clock, jsonvalue
from wfctl.client import Client
from wfctl.errors import InvalidInput, NotFound, WfctlError
from wfctl.show import render
from wfctl.ui import pages

# Every response says where its parts may come from: this server alone, nothing inline, no
# frames; a value that slipped through escaping still could not run.
CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
       "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
SECURITY_HEADERS = (
    ("Content-Security-Policy", CSP),
    ("X-Content-Type-Options", "nosniff"),
    ("Referrer-Policy", "no-referrer"),
    ("X-Frame-Options", "DENY"),
    ("Cache-Control", "no-store"),
)
STATIC_TYPES = {".css": "text/css; charset=utf-8", ".js": "text/javascript; charset=utf-8",
                ".svg": "image/svg+xml"}
TOKEN_COOKIE = "wfctl_ui_token"
ACTIONS = ("signal", "pause", "resume", "cancel", "terminate", "retry")
# What a cancel or terminate from here records as its reason, so that history tells it apart.
VIA = "from the web view"
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "[::1]")


def _shown(value: Any) -> Any:
    """What a template prints of a value: an instant as the ISO text `--json` has."""
    return clock.iso(value) if isinstance(value, datetime) else value


@dataclass
class Response:
    status: int
    body: bytes = b""
    content_type: str = "text/html; charset=utf-8"
    headers: list[tuple[str, str]] = field(default_factory=list)

    @property
    def text(self) -> str:
        return self.body.decode()

    def json(self) -> Any:
        return json.loads(self.body)


@dataclass
class Request:
    method: str
    path: list[str]
    query: dict[str, list[str]]
    headers: Mapping[str, str]
    form: dict[str, list[str]]

    def arg(self, name: str) -> str | None:
        values = self.query.get(name)
        return values[-1] if values else None

    def field(self, name: str) -> str:
        values = self.form.get(name)
        return values[-1].strip() if values else ""


class App:
    """The web view of one database: `handle(method, target, headers, body)` -> Response."""

    def __init__(self, client: Client, *, allow_actions: bool = False, token: str | None = None,
                 hosts: set[str] | None = None,
                 changes: Callable[[], dict[str, Any]] | None = None,
                 database: str = "") -> None:
        self.client = client
        self.allow_actions = allow_actions
        self.token = token or None
        # The Host a request may name (loopback_hosts); None: any (a remote bind, which the
        # token guards instead).
        self.hosts = hosts
        self.changes = changes or (lambda: {"version": 0})
        self.database = database
        self.csrf = secrets.token_urlsafe(32)
        self.root = resources.files("wfctl.ui")
        self.templates = Environment(
            loader=FileSystemLoader(str(self.root / "templates")),
            autoescape=select_autoescape(default=True, default_for_string=True),
            trim_blocks=True, lstrip_blocks=True, finalize=_shown)
        self.templates.filters["id_url"] = lambda value: quote(str(value), safe="")
        self.templates.tests["instant"] = lambda value: isinstance(value, datetime)
        self.templates.filters["seconds"] = render.seconds_text
        self.templates.globals.update(
            local=pages.local, relative=pages.relative, json=pages.pretty_json,
            urgency=pages.urgency, ago=render.ago, zoned=render.zoned,
            actions_allowed=allow_actions, csrf=self.csrf, database=database, query=urlencode)

    def warm(self) -> None:
        """Compile the templates and import what pages draw with, so that the first page a
        person opens comes as fast as the next."""
        from wfctl.ui import svg  # noqa: F401

        for name in self.templates.list_templates():
            self.templates.get_template(name)

    @staticmethod
    def loopback_hosts(port: int) -> set[str]:
        """What a request to a server on loopback names as its Host: a page elsewhere whose own
        host name points at 127.0.0.1 (DNS rebinding) names another, and is refused."""
        return {*(f"{host}:{port}" for host in LOOPBACK_HOSTS),
                *(LOOPBACK_HOSTS if port == 80 else ())}

    # the edge

    def handle(self, method: str, target: str, headers: Mapping[str, str],
               body: bytes = b"") -> Response:
        """Answer one request; nothing raised leaves here but a bug's."""
        parts = urlsplit(target)
        path = [unquote(segment) for segment in parts.path.split("/")[1:]]
        if path and path[-1] == "" and len(path) > 1:
            path.pop()
        query = parse_qs(parts.query, keep_blank_values=True)
        lowered = {name.lower(): value for name, value in headers.items()}
        if self.hosts is not None and lowered.get("host") not in self.hosts:
            return self._plain(400, "this server answers only to its own address "
                                    f"({min(self.hosts)})")
        refused = self._authorize(method, parts.path, query, lowered)
        if refused is not None:
            return refused
        form: dict[str, list[str]] = {}
        if method == "POST":
            form = parse_qs(body.decode("utf-8", "replace"), keep_blank_values=True)
        request = Request(method, path, query, lowered, form)
        try:
            response = self._route(request)
        except NotFound as exc:
            response = self._not_found(request, str(exc))
        except InvalidInput as exc:
            response = self._error(request, 400, str(exc))
        except WfctlError as exc:
            response = self._error(request, 503, str(exc))
        if method == "HEAD":
            response.body = b""
        response.headers.extend(SECURITY_HEADERS)
        return response

    def _authorize(self, method: str, path: str, query: dict[str, list[str]],
                   headers: dict[str, str]) -> Response | None:
        """None when the request may go on; else the refusal (401 without the token)."""
        if self.token is None:
            return None
        given = (query.get("token") or [None])[-1]
        if given is not None and method in ("GET", "HEAD") and self._is_token(given):
            # The token comes once in the URL (as printed at start); a cookie carries it from
            # then on, and the address bar loses it.
            rest = urlencode([(k, v) for k, vs in query.items() if k != "token" for v in vs],
                             doseq=True)
            return Response(303, headers=[
                ("Location", path + (f"?{rest}" if rest else "")),
                ("Set-Cookie", f"{TOKEN_COOKIE}={given}; HttpOnly; SameSite=Strict; Path=/")])
        bearer = headers.get("authorization", "")
        if bearer.startswith("Bearer ") and self._is_token(bearer[7:].strip()):
            return None
        for cookie in headers.get("cookie", "").split(";"):
            name, _, value = cookie.strip().partition("=")
            if name == TOKEN_COOKIE and self._is_token(value):
                return None
        response = self._plain(401, "this server needs its token: open the address it printed "
                                    "(…?token=…), or send Authorization: Bearer <WFCTL_UI_TOKEN>")
        response.headers.append(("WWW-Authenticate", 'Bearer realm="wfctl ui"'))
        return response

    def _is_token(self, given: str) -> bool:
        assert self.token is not None
        return hmac.compare_digest(given.encode(), self.token.encode())

    def _route(self, request: Request) -> Response:
        method, path = request.method, request.path
        if method not in ("GET", "HEAD", "POST"):
            return self._refuse_change()
        if method == "POST":
            if not self.allow_actions:
                return self._refuse_change()
            if len(path) == 3 and path[0] == "instances" and path[2] in ACTIONS:
                return self._action(request, path[1], path[2])
            return self._plain(404, "no such action")
        match path:
            case [""]:
                return self._list_page(request)
            case ["schedules"]:
                return self._page("schedules.html", schedules=self.client.schedules(),
                                  now=self.client.now(), title="Schedules")
            case ["instances", instance_id]:
                return self._instance_page(request, instance_id)
            case ["instances", instance_id, "history"]:
                return self._history_page(request, instance_id)
            case ["api", "instances"]:
                return self._json(self._list(request)[0])
            case ["api", "instances", instance_id]:
                return self._describe_json(request, instance_id)
            case ["api", "instances", instance_id, "history"]:
                return self._json(self._history(request, instance_id))
            case ["api", "schedules"]:
                return self._json(self.client.schedules())
            case ["api", "changes"]:
                return self._json(self.changes())
            case ["static", name]:
                return self._static(name)
        return self._not_found(request, "no such page")

    def _refuse_change(self) -> Response:
        response = self._plain(405, "this server changes nothing: start it with "
                                    "--allow-actions to offer actions")
        response.headers.append(("Allow", "GET, HEAD"))
        return response

    # responses

    def _plain(self, status: int, message: str) -> Response:
        return Response(status, (message + "\n").encode(), "text/plain; charset=utf-8")

    def _json(self, document: Any, status: int = 200) -> Response:
        return Response(status, jsonvalue.text(document, indent=2).encode(),
                        "application/json; charset=utf-8")

    def _page(self, template: str, status: int = 200, **context: Any) -> Response:
        context.setdefault("changes", self.changes())
        if "now" not in context:
            try:
                context["now"] = self.client.now()
            except WfctlError:
                context["now"] = clock.now()
        html = self.templates.get_template(template).render(**context)
        return Response(status, html.encode())

    def _is_api(self, request: Request) -> bool:
        return bool(request.path) and request.path[0] == "api"

    def _not_found(self, request: Request, message: str) -> Response:
        if self._is_api(request):
            reason = "run_not_found" if "has no run" in message else "instance_not_found"
            return self._json({"found": False, "reason": reason}, 404)
        return self._page("error.html", 404, title="Not found", message=message)

    def _error(self, request: Request, status: int, message: str) -> Response:
        if self._is_api(request):
            return self._json({"error": message}, status)
        return self._page("error.html", status, title="Error", message=message)

    def _static(self, name: str) -> Response:
        suffix = name[name.rfind("."):] if "." in name else ""
        asset = self.root / "static" / name
        if suffix not in STATIC_TYPES or "/" in name or not asset.is_file():
            return self._plain(404, "no such file")
        response = Response(200, asset.read_bytes(), STATIC_TYPES[suffix])
        return response

    # reads

    def _run(self, request: Request) -> int | None:
        text = request.arg("run")
        if text in (None, ""):
            return None
        if not text.isdigit() or not 1 <= int(text) <= 2**63 - 1:
            raise InvalidInput(f"run must be a whole number of at least 1 (got {text!r})")
        return int(text)

    def _list(self, request: Request) -> tuple[list[dict[str, Any]], pages.ListFilters]:
        filters = pages.ListFilters.read(request.arg, self.client.now())
        rows = self.client.list(status=filters.status, workflow_type=filters.workflow_type,
                                since=filters.since_at, limit=filters.limit,
                                before=filters.before, schedule=filters.schedule)
        return rows, filters

    def _list_page(self, request: Request) -> Response:
        now = self.client.now()
        try:
            filters = pages.ListFilters.read(request.arg, now, paged=True)
        except InvalidInput as exc:
            return self._page("list.html", 400, filters=pages.ListFilters(), rows=[], now=now,
                              more=False, error=str(exc), title="Instances")
        fetched = self.client.list(status=filters.status, workflow_type=filters.workflow_type,
                                   since=filters.since_at, limit=filters.limit,
                                   before=filters.before, schedule=filters.schedule)
        rows = fetched[:pages.PAGE]
        return self._page("list.html", filters=filters, rows=rows, now=now,
                          more=len(fetched) > pages.PAGE, error=None, title="Instances")

    def _describe_json(self, request: Request, instance_id: str) -> Response:
        return self._json(self.client.describe(instance_id, self._run(request)))

    def _history(self, request: Request, instance_id: str) -> list[dict[str, Any]]:
        all_runs = request.arg("all_runs") in ("1", "true", "on")
        run = self._run(request)
        if run is not None and all_runs:
            raise InvalidInput("run and all_runs exclude each other")
        return self.client.history(instance_id, run=run, all_runs=all_runs,
                                   event_types=pages.event_types(request.query.get("event_type")))

    def _instance_page(self, request: Request, instance_id: str, *, status: int = 200,
                       notice: str | None = None, error: str | None = None) -> Response:
        run = self._run(request)
        doc = self.client.describe(instance_id, run)
        events = self.client.history(instance_id, run=doc["run"]["run_number"])
        now = self.client.now()
        actions = pages.actions(self.client, doc) if self.allow_actions else None
        done = request.arg("done")
        return self._page(
            "instance.html", status, doc=doc, now=now, view=pages.instance_view(doc, now),
            timeline=pages.timeline_svg(doc, events, now), actions=actions,
            notice=notice or pages.DONE.get(done or ""), error=error,
            title=f"{doc['workflow_instance_id']} · {doc['workflow_type']}")

    def _history_page(self, request: Request, instance_id: str) -> Response:
        doc = self.client.describe(instance_id)
        events = self._history(request, instance_id)
        return self._page(
            "history.html", doc=doc, rows=pages.history_rows(events, doc["created_at"]),
            now=self.client.now(), chosen=set(request.query.get("event_type") or ()),
            event_types=pages.EVENT_TYPE_CHOICES, run=request.arg("run") or "",
            all_runs=request.arg("all_runs") in ("1", "true", "on"),
            request_query=[(k, v) for k, vs in request.query.items() for v in vs if v],
            title=f"History of {doc['workflow_instance_id']}")

    # actions

    def _action(self, request: Request, instance_id: str, action: str) -> Response:
        origin = request.headers.get("origin")
        if origin is not None and origin != "null" and \
                urlsplit(origin).netloc != request.headers.get("host"):
            return self._plain(403, "a change must come from a page of this server")
        if not hmac.compare_digest(request.field("csrf").encode(), self.csrf.encode()):
            return self._plain(403, "the form is stale or forged (no valid CSRF token): "
                                    "reload the page and try again")
        if request.field("confirmed") != "yes":
            doc = self.client.describe(instance_id)
            return self._page("confirm.html", doc=doc, action=action,
                              fields=[(k, v[-1]) for k, v in request.form.items()
                                      if k not in ("csrf", "confirmed")],
                              summary=pages.action_summary(action, request.field),
                              title=f"Confirm {action}")
        try:
            self._perform(instance_id, action, request.field)
        except (InvalidInput, WfctlError) as exc:
            if isinstance(exc, NotFound):
                raise
            return self._instance_page(request, instance_id, status=409, error=str(exc))
        location = f"/instances/{quote(instance_id, safe='')}?{urlencode({'done': action})}"
        return Response(303, headers=[("Location", location)])

    def _perform(self, instance_id: str, action: str, field: Callable[[str], str]) -> None:
        client = self.client
        # Each action is recorded with where it came from, after the reason given (if any).
        reason = f"{field('reason')} ({VIA})" if field("reason") else VIA
        if action == "signal":
            name = field("name")
            names = pages.signal_names(client, instance_id)
            if name not in names:
                raise InvalidInput(f"{name!r} is no signal this workflow waits for (it waits "
                                   f"for {', '.join(names) or 'none'})")
            client.signal(instance_id, name, pages.signal_data(field("data")), reason=reason)
        elif action in ("pause", "resume", "cancel", "terminate"):
            getattr(client, action)(instance_id, reason)
        else:
            choice = field("deadline")
            if choice == "extend":
                if not field("extend"):
                    raise InvalidInput("extend the deadline by how long? (a duration: 1h, 30m)")
                client.retry(instance_id, extend_deadline=field("extend") or None, reason=reason)
            else:
                client.retry(instance_id, clear_deadline=choice == "clear", reason=reason)
