"""Requests to an HTTP API: one operation's pages, followed within caps, as one caller.

A request carries the caller's own credential, placed where the spec's security scheme says
(a bearer or basic Authorization header, an API key header, query parameter or cookie); the
credential never appears in what a request is reported as. Values go into the query string
encoded and into the path quoted segment by segment, so an argument cannot reach another path.
A next page is followed only on the API's own origin. A 429 or 503 is retried, after what
Retry-After asks (within the call's time), only for a safe method and only where the response
asks for it or the spec declares the status; anything else the API answers with is a clear
error that says the status and what the API said.

The API is untrusted: whatever it sends back (an error's text, the rows, a next-page link or
cursor) has the credential replaced in every spelling it can echo (secretforms.py) before it is
cut or kept, and the bytes one call reads, all its pages together, are capped
(``serve.max_api_call_bytes``): a page cannot be larger than what is left of the call's budget.
"""

from __future__ import annotations

import base64
import contextlib
import datetime as dt
import email.utils
import functools
import json
import re
import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl, quote, urlencode, urljoin, urlsplit, urlunsplit

import httpx2 as httpx

from tether.errors import SourceError
from tether.sources.secretforms import SHOWN_SECRET, Scrubber

MAX_PAGES = 50
"""Pages one call follows at most, whatever the rows cap leaves."""
MAX_WAIT = 10.0
"""Seconds one Retry-After may ask before the call gives up instead of waiting."""
MIN_WAIT = 0.5
"""Seconds waited at least before a retry (a Retry-After of 0 is no invitation to hammer)."""
MAX_RETRIES = 3
"""Retries of one request at most."""
MAX_BODY = 32 << 20
"""Bytes of one response read at most."""
MAX_CALL_BYTES = 32 << 20
"""Bytes one call reads at most, all its pages together (``serve.max_api_call_bytes``)."""
MAX_ROW_DEPTH = 200
"""Levels a value of a row may nest (deeper: the API's answer is refused, not followed)."""
SAID_CHARS = 200
"""Characters of an API's error message said at most."""


class ApiError(SourceError):
    """The API answered with an error, timed out, or could not be reached."""


class OverBudget(ApiError):
    """The call's bytes ran out before a page was read whole."""


@dataclass(frozen=True)
class Credential:
    """A secret and where the security scheme puts it."""

    secret: str
    scheme: dict[str, Any]

    @property
    def query_name(self) -> str | None:
        """The query parameter the secret travels in (an API key in the query), else None."""
        if str(self.scheme.get("type", "")).lower() == "apikey" and self.scheme.get(
                "in") == "query":
            return str(self.scheme.get("name") or "")
        return None

    @functools.cached_property
    def scrubber(self) -> Scrubber:
        basic = (str(self.scheme.get("type", "")).lower() == "http"
                 and str(self.scheme.get("scheme", "")).lower() == "basic")
        return Scrubber(self.secret, basic=basic)

    def scrub(self, text: str, cut: int | None = None) -> str:
        """``text`` with the secret replaced in every spelling a server can echo (as sent,
        in any case, base64, URL-encoded); with ``cut``, replaced first and cut after."""
        return self.scrubber.scrub(text, cut)

    def apply(self, headers: dict[str, str],
              query: list[tuple[str, str | int | float | bool | None]]) -> None:
        """Put the secret in the request (in the query at :attr:`query_name`, if there)."""
        kind = str(self.scheme.get("type", "")).lower()
        name = str(self.scheme.get("name") or "")
        if self.query_name is not None:
            query.append((self.query_name, self.secret))
        elif kind == "apikey" and self.scheme.get("in") == "cookie":
            headers["Cookie"] = f"{name}={self.secret}"
        elif kind == "apikey":
            headers[name] = self.secret
        elif kind == "http" and str(self.scheme.get("scheme", "")).lower() == "basic":
            headers["Authorization"] = "Basic " + base64.b64encode(self.secret.encode()).decode()
        else:  # bearer, oauth2, openIdConnect
            headers["Authorization"] = f"Bearer {self.secret}"


@dataclass
class Page:
    body: Any
    headers: httpx.Headers
    url: str


@dataclass
class Fetch:
    """What a call's requests brought back: the rows, where to go on, and what was asked."""

    rows: list[dict[str, Any]]
    next_state: dict[str, Any] | None
    requests: list[str] = field(default_factory=list)
    marks: list[dict[str, Any]] = field(default_factory=list)
    """For each row, the state that resumes at it (a call cut short by the bytes cap goes on
    from the first row it could not give)."""
    date: dt.datetime | None = None
    retries: int = 0
    read: int = 0
    """Bytes of the API's answers read so far (capped by the client's ``max_bytes``)."""


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
    """Requests to one API at ``base_url``; ``timeout`` bounds one call's requests together,
    ``max_bytes`` the bytes they read together."""

    def __init__(self, base_url: str, timeout: float, max_bytes: int = MAX_CALL_BYTES):
        self.base = base_url.rstrip("/")
        self.origin = _origin(self.base)
        self.timeout = timeout
        self.max_bytes = max_bytes
        self.http = httpx.Client(follow_redirects=False)

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
        earlier call stopped: the next request and the rows of it already given). A page that
        repeats one already read, or a short page of page numbers or offsets, is the last.
        Where the call's bytes run out after some rows, it stops there with the page not read
        as where to go on. No error names the credential, in any spelling."""
        try:
            return self._rows(plan, args, credential, want, state, max_pages)
        except ApiError as e:
            if credential is None:
                raise
            raise type(e)(credential.scrub(e.message), hint=e.hint) from None

    def _rows(self, plan: dict[str, Any], args: dict[str, Any], credential: Credential | None,
              want: int, state: dict[str, Any] | None, max_pages: int) -> Fetch:
        deadline = time.monotonic() + self.timeout
        paging = plan.get("paging") or {}
        kind = paging.get("kind", "none")
        state = dict(state or {})
        per, base_url, query = self._first(plan, args, want, state)
        skip = int(state.get("skip", 0))
        out = Fetch([], None)
        pages = 0
        visited: set[str] = set()

        def request(at: dict[str, Any]) -> tuple[str, list[tuple[str, str]], list[Any]]:
            """The URL and query of the page ``at`` names, and its own paging parameter."""
            if "url" in at:
                return str(at["url"]), [], []
            extra = [(paging["param"], str(at["value"]))] if "value" in at else []
            if kind in ("page", "offset") and "value" not in at:
                first = paging.get("first", 1 if kind == "page" else 0)
                extra = [(paging["param"], str(first))]
            return base_url, [*query, *extra], extra

        while True:
            url, sent, extra = request(state)
            visited.add(json.dumps([url, sent]))
            here = _bare(state)
            try:
                page = self.get(plan, url, sent, credential, deadline, out)
            except OverBudget:
                if not out.rows:
                    raise
                out.next_state = {**here, "skip": skip, "size": per}  # this page, next call
                return out
            pages += 1
            got = _rows(page.body, plan.get("items"))
            if credential is not None:
                got = [_scrubbed(credential, r) for r in got]
            nxt = self.next_state(plan, page, got, extra, credential)
            if nxt is not None and kind in ("page", "offset") and per and len(got) < per:
                nxt = None  # a short page is the last
            if nxt is not None and json.dumps(request(nxt)[:2]) in visited:
                nxt = None  # the API pointed back at a page already read
            taken = got[skip:]
            room = want - len(out.rows)
            out.marks += [{**here, "skip": skip + j, "size": per}
                          for j in range(min(len(taken), room))]
            if len(taken) > room:
                out.rows += taken[:room]
                out.next_state = {**here, "skip": skip + room, "size": per}
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

    def _first(self, plan: dict[str, Any], args: dict[str, Any], want: int,
               state: dict[str, Any]) -> tuple[int | None, str, list[tuple[str, str]]]:
        """(the page size, the URL, the query) of the call's first request: the arguments in
        the path and the query, and the page size the first call of a cursor asked."""
        paging = plan.get("paging") or {}
        by_in = {p["name"]: p["in"] for p in plan["params"]}
        path_args = {k: v for k, v in args.items() if by_in.get(k) == "path"}
        query = [(k, v) for k, v0 in args.items() if by_in.get(k) == "query"
                 for v in query_value(v0)]
        size = paging.get("size")
        per = None
        if size:  # the first call's page size holds for the pages a cursor goes on with
            cap = paging.get("size_max")
            per = int(state.get("size") or (min(want, cap) if cap else want))
            query = [(k, v) for k, v in query if k != size]
            query.append((size, str(per)))
        return per, self.url(plan["path"], path_args), query

    def next_state(self, plan: dict[str, Any], page: Page, got: list[Any],
                   sent: list[tuple[str, str]], credential: Credential | None
                   ) -> dict[str, Any] | None:
        """The request after ``page``, or None at the last page. A next URL is kept without
        the caller's credential (it is added again when the page is asked for); a cursor or a
        link that carries the credential otherwise is refused (a caller holds the cursor)."""
        paging = plan.get("paging") or {}
        kind = paging.get("kind", "none")
        if kind in ("link", "next_url"):
            if kind == "link":
                m = re.search(r'<([^>]+)>\s*;[^,]*rel="?next"?', page.headers.get("link", ""))
                value: Any = m.group(1) if m else None
            else:
                value = _at(page.body, paging.get("field") or [])
            if not isinstance(value, str) or not value:
                return None
            try:
                url = urljoin(page.url, value)
            except ValueError:
                raise ApiError("the API's next-page link is not a URL.") from None
            return self.same_origin(_without(url, credential))
        if kind == "cursor":
            value = _at(page.body, paging.get("field") or [])
            if credential is not None and isinstance(value, str) and credential.scrubber.holds(
                    value):
                raise ApiError("the API's next-page cursor carries the caller's credential; "
                               "tether does not hand it to the caller in a cursor.")
            return {"value": value} if isinstance(value, str | int) and value != "" else None
        if kind in ("page", "offset"):
            if not got:
                return None
            now = int(sent[-1][1]) if sent else int(paging.get("first", 1))
            return {"value": now + 1 if kind == "page" else now + len(got)}
        return None

    def same_origin(self, url: str) -> dict[str, Any]:
        try:
            there = _origin(url)
        except ValueError:
            raise ApiError("the API's next-page link is not a URL.") from None
        if there != self.origin:
            raise ApiError(f"the API sent the next page to {there}, not to {self.origin}; "
                           "tether does not send the caller's credential elsewhere.")
        return {"url": url}

    def get(self, plan: dict[str, Any], url: str, given: list[tuple[str, str]],
            credential: Credential | None, deadline: float, out: Fetch) -> Page:
        headers = {"Accept": "application/json"}
        query: list[tuple[str, str | int | float | bool | None]] = list(given)
        if credential is not None:
            credential.apply(headers, query)
        scrub = credential.scrub if credential else (lambda t, cut=None: t[:cut])
        shown = scrub(_shown(url, query, credential.query_name if credential else None))
        target = httpx.URL(url).copy_merge_params(httpx.QueryParams(query)) if query else url
        method = str(plan.get("method", "GET"))
        retry_on = set(plan.get("retry") or [])
        retries = 0
        while True:
            status, r_headers, data, final = self._answer(method, shown, target, headers,
                                                          deadline, out)
            out.requests.append(f"{method} {shown} -> {status}")
            if status in (429, 503):
                wait = _retry_after(r_headers.get("retry-after"))
                may = method in ("GET", "QUERY", "HEAD") and retries < MAX_RETRIES and (
                    wait is not None or status in retry_on)
                wait = max(MIN_WAIT, 1.0 if wait is None else wait)
                if may and wait <= MAX_WAIT and time.monotonic() + wait < deadline:
                    retries += 1
                    out.retries += 1
                    time.sleep(wait)
                    continue
                raise ApiError(f"{method} {shown} answered {status} "
                               f"({'rate limited' if status == 429 else 'unavailable'}"
                               f"{'; retried ' + str(retries) + ' times' if retries else ''}).",
                               hint="Call again later.")
            if status in (401, 403):
                raise ApiError(f"{method} {shown} answered {status}: the API refused "
                               "the caller's credential.",
                               hint="Set a valid one with `tether token credential`.")
            if status >= 400:
                raise ApiError(f"{method} {shown} answered {status}: {_said(data, scrub)}")
            return Page(_json(data, f"{method} {shown} answered {status}"), r_headers, final)

    def _answer(self, method: str, shown: str, target: Any, headers: dict[str, str],
                deadline: float, out: Fetch) -> tuple[int, httpx.Headers, bytes, str]:
        """One response within the call's time and what is left of its bytes (counted)."""
        left = deadline - time.monotonic()
        if left <= 0:
            raise ApiError(f"{method} {shown} did not answer within the call's time.")
        try:
            status, r_headers, data, final = self._read(method, target, headers, left,
                                                        deadline, self.max_bytes - out.read)
        except httpx.TimeoutException:
            raise ApiError(f"{method} {shown} did not answer within the call's time "
                           f"({self.timeout:g} s).") from None
        except httpx.HTTPError as e:
            raise ApiError(f"{method} {shown} failed: {e.__class__.__name__}.",
                           hint="Check that the API is up and base_url is right.") from None
        out.read += len(data)
        date = r_headers.get("date")
        if date and status < 400:
            with contextlib.suppress(TypeError, ValueError):
                when = email.utils.parsedate_to_datetime(date).astimezone(dt.UTC)
                out.date = when if out.date is None else min(out.date, when)
        return status, r_headers, data, final

    def _read(self, method: str, target: Any, headers: dict[str, str], left: float,
              deadline: float, budget: int) -> tuple[int, httpx.Headers, bytes, str]:
        """One response, its body read within the call's time and at most MAX_BODY bytes or
        the ``budget`` the call has left, whichever is less (refused as soon as it says or
        reads more)."""
        limit = min(MAX_BODY, budget)
        with self.http.stream(method, target, headers=headers, timeout=left) as r:
            said = r.headers.get("content-length", "")
            if said.isdigit() and int(said) > limit:
                raise _too_large(budget)
            chunks: list[bytes] = []
            size = 0
            for chunk in r.iter_bytes():
                size += len(chunk)
                if size > limit:
                    raise _too_large(budget)
                if time.monotonic() > deadline:
                    raise httpx.ReadTimeout("the body took longer than the call's time")
                chunks.append(chunk)
            return r.status_code, r.headers, b"".join(chunks), str(r.url)


def _too_large(budget: int) -> ApiError:
    if budget < MAX_BODY:
        return OverBudget(
            "the API's answers to this call are larger than serve.max_api_call_bytes "
            f"({budget / (1 << 20):.4g} MiB left of the call's bytes).",
            hint="Ask for fewer rows, or raise serve.max_api_call_bytes.")
    return ApiError(f"the API's answer is larger than {MAX_BODY >> 20} MiB; ask for fewer rows.")


def _json(data: bytes, said: str) -> Any:
    """A response's body as JSON; one that is not JSON, or nests deeper than Python reads,
    is a clear error."""
    try:
        return json.loads(data)
    except RecursionError:
        raise ApiError(f"{said} with JSON nested deeper than tether reads.") from None
    except ValueError:
        raise ApiError(f"{said} with a body that is not JSON.") from None


def _scrubbed(credential: Credential, row: dict[str, Any]) -> dict[str, Any]:
    """A row with the credential replaced in every text it holds, keys too (an API that
    echoes the Authorization header in a field)."""
    try:
        out = credential.scrubber.value(row, MAX_ROW_DEPTH)
    except ValueError:
        raise ApiError(f"the API's rows nest deeper than {MAX_ROW_DEPTH} levels; tether does "
                       "not read them.") from None
    return out if isinstance(out, dict) else row


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


def _said(data: bytes, scrub: Any) -> str:
    """What an error response says, short: its message field or the start of its text, the
    credential replaced before it is cut (a cut never leaves the secret's start)."""
    try:
        body = json.loads(data)
    except (ValueError, RecursionError):
        body = None
    if isinstance(body, dict):
        for k in ("message", "error", "detail", "title"):
            if isinstance(body.get(k), str):
                return str(scrub(str(body[k])[:SAID_CHARS * 20], cut=SAID_CHARS))
    text = data[:SAID_CHARS * 20].decode("utf-8", "replace").strip()
    return str(scrub(text, cut=SAID_CHARS)) or "no reason given"


def _without(url: str, credential: Credential | None) -> str:
    """``url`` less the credential's query parameter and any parameter holding the secret in
    any spelling; a link that still holds it (in its path) is refused."""
    if credential is None:
        return url
    s = urlsplit(url)
    name = credential.query_name
    holds = credential.scrubber.holds
    pairs = [(k, v) for k, v in parse_qsl(s.query, keep_blank_values=True)
             if k != name and not holds(k) and not holds(v)]
    kept = urlunsplit((s.scheme, s.netloc, s.path, urlencode(pairs), s.fragment))
    if holds(kept):
        raise ApiError("the API's next-page link carries the caller's credential; tether "
                       "does not keep it in a cursor.")
    return kept


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
