"""Requests to an HTTP API: one operation's pages, followed within caps, as one caller.

A request carries the caller's own credential, placed where the spec's security scheme says
(a bearer or basic Authorization header, an API key header, query parameter or cookie); the
credential never appears in what a request is reported as. Values go into the query string
encoded and into the path quoted segment by segment, so an argument cannot reach another path.
A next page is followed only on the API's own origin. A 429 or 503 is retried, after what
Retry-After asks (within the call's time), only for a safe method and only where the response
asks for it or the spec declares the status; anything else the API answers with is a clear
error that says the status and what the API said.
"""

from __future__ import annotations

import base64
import contextlib
import datetime as dt
import email.utils
import re
import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl, quote, urlencode, urljoin, urlsplit

import httpx2 as httpx

from tether.errors import SourceError

MAX_PAGES = 50
"""Pages one call follows at most, whatever the rows cap leaves."""
MAX_WAIT = 10.0
"""Seconds one Retry-After may ask before the call gives up instead of waiting."""
SHOWN_SECRET = "<credential>"


class ApiError(SourceError):
    """The API answered with an error, timed out, or could not be reached."""


@dataclass(frozen=True)
class Credential:
    """A secret and where the security scheme puts it."""

    secret: str
    scheme: dict[str, Any]

    def apply(self, headers: dict[str, str],
              query: list[tuple[str, str | int | float | bool | None]]) -> str | None:
        """Put the secret in the request; the query parameter it went into, if any."""
        kind = str(self.scheme.get("type", "")).lower()
        if kind == "apikey":
            name = str(self.scheme.get("name") or "")
            where = self.scheme.get("in")
            if where == "query":
                query.append((name, self.secret))
                return name
            if where == "cookie":
                headers["Cookie"] = f"{name}={self.secret}"
            else:
                headers[name] = self.secret
            return None
        if kind == "http" and str(self.scheme.get("scheme", "")).lower() == "basic":
            headers["Authorization"] = "Basic " + base64.b64encode(self.secret.encode()).decode()
            return None
        headers["Authorization"] = f"Bearer {self.secret}"  # bearer, oauth2, openIdConnect
        return None


@dataclass
class Page:
    status: int
    body: Any
    headers: httpx.Headers
    url: str


@dataclass
class Fetch:
    """What a call's requests brought back: the rows, where to go on, and what was asked."""

    rows: list[dict[str, Any]]
    next_state: dict[str, Any] | None
    requests: list[str] = field(default_factory=list)
    date: dt.datetime | None = None
    retries: int = 0


def path_value(value: Any, name: str) -> str:
    text = str(value).lower() if isinstance(value, bool) else str(value)
    if text in ("", ".", ".."):
        raise ApiError(f"{name!r} may not be {text!r}: it would name another path.")
    return quote(text, safe="")


def query_value(value: Any) -> list[str]:
    if isinstance(value, bool):
        return [str(value).lower()]
    if isinstance(value, list | tuple):
        return [v for x in value for v in query_value(x)]
    return [str(value)]


class ApiClient:
    """Requests to one API at ``base_url``; ``timeout`` bounds one call's requests together."""

    def __init__(self, base_url: str, timeout: float, client: httpx.Client | None = None):
        self.base = base_url.rstrip("/")
        self.origin = _origin(self.base)
        self.timeout = timeout
        self.http = client or httpx.Client(follow_redirects=False)

    def close(self) -> None:
        self.http.close()

    def url(self, path: str, path_args: dict[str, Any]) -> str:
        def sub(m: re.Match[str]) -> str:
            name = m.group(1)
            if name not in path_args:
                raise ApiError(f"the path {path} needs {name!r}.")
            return path_value(path_args[name], name)

        return self.base + re.sub(r"\{([^}]+)\}", sub, path)

    def rows(self, plan: dict[str, Any], args: dict[str, Any], credential: Credential | None,
             want: int, state: dict[str, Any] | None = None, max_pages: int = MAX_PAGES
             ) -> Fetch:
        """Up to ``want`` rows of the operation, following its pages from ``state`` (where an
        earlier call stopped: the next request and the rows of it already given)."""
        deadline = time.monotonic() + self.timeout
        paging = plan.get("paging") or {}
        kind = paging.get("kind", "none")
        by_in = {p["name"]: p["in"] for p in plan["params"]}
        path_args = {k: v for k, v in args.items() if by_in.get(k) == "path"}
        query = [(k, v) for k, v0 in args.items() if by_in.get(k) == "query"
                 for v in query_value(v0)]
        size = paging.get("size")
        state = dict(state or {})
        per = None
        if size:  # the first call's page size holds for the pages a cursor goes on with
            cap = paging.get("size_max")
            per = int(state.get("size") or (min(want, cap) if cap else want))
            query = [(k, v) for k, v in query if k != size]
            query.append((size, str(per)))
        base_url = self.url(plan["path"], path_args)
        skip = int(state.get("skip", 0))
        out = Fetch([], None)
        pages = 0
        while True:
            if "url" in state:
                url, extra = str(state["url"]), []
            else:
                extra = [(paging["param"], str(state["value"]))] if "value" in state else []
                if kind in ("page", "offset") and "value" not in state:
                    extra = [(paging["param"], str(paging.get("first", 1 if kind == "page" else 0)))]
                url = base_url
            page = self.get(plan, url, [*query, *extra] if "url" not in state else [],
                            credential, deadline, out)
            pages += 1
            got = _rows(page.body, plan.get("items"))
            nxt = self.next_state(plan, page, got, state, extra)
            taken = got[skip:]
            room = want - len(out.rows)
            if len(taken) > room:
                out.rows += taken[:room]
                out.next_state = {**_bare(state), "skip": skip + room, "size": per}
                return out
            out.rows += taken
            skip = 0
            if nxt is None:
                out.next_state = None
                return out
            state = {**nxt, "size": per}
            if len(out.rows) >= want or pages >= max_pages or time.monotonic() > deadline:
                out.next_state = state
                return out

    def next_state(self, plan: dict[str, Any], page: Page, got: list[Any],
                   state: dict[str, Any], sent: list[tuple[str, str]]) -> dict[str, Any] | None:
        """The request after ``page``, or None at the last page."""
        paging = plan.get("paging") or {}
        kind = paging.get("kind", "none")
        if kind == "link":
            m = re.search(r'<([^>]+)>\s*;[^,]*rel="?next"?', page.headers.get("link", ""))
            return self.same_origin(urljoin(page.url, m.group(1))) if m else None
        if kind == "next_url":
            value = _at(page.body, paging.get("field") or [])
            return self.same_origin(urljoin(page.url, value)) if isinstance(
                value, str) and value else None
        if kind == "cursor":
            value = _at(page.body, paging.get("field") or [])
            return {"value": value} if isinstance(value, str | int) and value != "" else None
        if kind in ("page", "offset"):
            if not got:
                return None
            now = int(sent[-1][1]) if sent else int(paging.get("first", 1))
            return {"value": now + 1 if kind == "page" else now + len(got)}
        return None

    def same_origin(self, url: str) -> dict[str, Any]:
        if _origin(url) != self.origin:
            raise ApiError(f"the API sent the next page to {_origin(url)}, not to "
                           f"{self.origin}; tether does not send the caller's credential "
                           "elsewhere.")
        return {"url": url}

    def get(self, plan: dict[str, Any], url: str, given: list[tuple[str, str]],
            credential: Credential | None, deadline: float, out: Fetch) -> Page:
        headers = {"Accept": "application/json"}
        query: list[tuple[str, str | int | float | bool | None]] = list(given)
        secret_param = credential.apply(headers, query) if credential else None
        shown = _shown(url, query, secret_param)
        method = str(plan.get("method", "GET"))
        retry_on = set(plan.get("retry") or [])
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise ApiError(f"{method} {shown} did not answer within the call's time.")
            try:
                r = self.http.request(method, url, headers=headers, timeout=left,
                                      params=httpx.QueryParams(query) if query else None)
            except httpx.TimeoutException:
                raise ApiError(f"{method} {shown} did not answer within the call's time "
                               f"({self.timeout:g} s).") from None
            except httpx.HTTPError as e:
                raise ApiError(f"{method} {shown} failed: {e.__class__.__name__}.",
                               hint="Check that the API is up and base_url is right.") from None
            out.requests.append(f"{method} {shown} -> {r.status_code}")
            if r.status_code in (429, 503):
                wait = _retry_after(r.headers.get("retry-after"))
                may = method in ("GET", "QUERY", "HEAD") and (
                    wait is not None or r.status_code in retry_on)
                wait = 1.0 if wait is None else wait
                if may and wait <= MAX_WAIT and time.monotonic() + wait < deadline:
                    out.retries += 1
                    time.sleep(wait)
                    continue
                raise ApiError(f"{method} {shown} answered {r.status_code} "
                               f"({'rate limited' if r.status_code == 429 else 'unavailable'}"
                               f"{f'; it asks to wait {wait:g} s' if wait else ''}).",
                               hint="Call again later.")
            if r.status_code in (401, 403):
                raise ApiError(f"{method} {shown} answered {r.status_code}: the API refused "
                               "the caller's credential.",
                               hint="Set a valid one with `tether token credential`.")
            if r.status_code >= 400:
                raise ApiError(f"{method} {shown} answered {r.status_code}: "
                               f"{_said(r)}")
            try:
                body = r.json()
            except ValueError:
                raise ApiError(f"{method} {shown} answered {r.status_code} with a body that is "
                               "not JSON.") from None
            date = r.headers.get("date")
            if date:
                with contextlib.suppress(TypeError, ValueError):
                    out.date = email.utils.parsedate_to_datetime(date).astimezone(dt.UTC)
            return Page(r.status_code, body, r.headers, str(r.url))


def _origin(url: str) -> str:
    s = urlsplit(url)
    return f"{s.scheme}://{s.netloc}".lower()


def _bare(state: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in state.items() if k not in ("skip", "size")}


def _shown(url: str, query: list[tuple[str, str | int | float | bool | None]],
           secret_param: str | None) -> str:
    """The request as evidence shows it: the credential replaced, in the URL as in the query."""
    s = urlsplit(url)
    pairs: list[tuple[str, Any]] = [*parse_qsl(s.query, keep_blank_values=True), *query]
    if secret_param:
        pairs = [(k, SHOWN_SECRET if k == secret_param else v) for k, v in pairs]
    text = f"{s.scheme}://{s.netloc}{s.path}"
    return text + (f"?{urlencode(pairs)}" if pairs else "")


def _retry_after(raw: str | None) -> float | None:
    if not raw:
        return None
    try:
        return max(0.0, float(raw))
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(raw)
            return max(0.0, (when - dt.datetime.now(dt.UTC)).total_seconds())
        except (TypeError, ValueError):
            return None


def _said(r: httpx.Response) -> str:
    """What an error response says, short: its message field or the start of its text."""
    try:
        body = r.json()
    except ValueError:
        body = None
    if isinstance(body, dict):
        for k in ("message", "error", "detail", "title"):
            if isinstance(body.get(k), str):
                return str(body[k])[:200]
    return (r.text or r.reason_phrase or "no reason given")[:200].strip()


def _at(body: Any, path: list[str] | tuple[str, ...]) -> Any:
    for k in path:
        if not isinstance(body, dict):
            return None
        body = body.get(k)
    return body


def _rows(body: Any, items: list[str] | None) -> list[dict[str, Any]]:
    if items is None:
        return [body] if isinstance(body, dict) else []
    found = _at(body, items) if items else body
    if not isinstance(found, list):
        raise ApiError("the API's response does not hold its list of rows where the spec "
                       f"says ({'.'.join(items) or 'the response itself'}).")
    return [x if isinstance(x, dict) else {"value": x} for x in found]
