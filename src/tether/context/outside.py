"""Outside text is data: words from an API spec, a dbt project, OpenLineage events or a glossary
document are quoted as what that source says, never read as tether's own voice.

Three parts, used by every importer and generator that takes such words and by the lint:

- :func:`clean` neutralises markup and bounds length: HTML comments, ``<script>``/``<style>``
  elements with their content and every other tag go; Markdown images and links keep their text
  only; control, zero-width, bidi-override and other invisible characters go; whitespace folds
  to single spaces; text longer than the limit is cut at a word and ends with an ellipsis.
  Content words are kept (nothing is dropped for what it says).
- :func:`quote` frames cleaned words as their source's (``the dbt project says: “...”``), so a
  sentence that reads as an order to the model is visibly a quotation, attributed;
  :func:`quoted` puts an outside name in quotation marks.
- :data:`INSTRUCTION_SIGNS` with :func:`instruction_signs`: the shapes of text that speaks to a
  model (an order to ignore its instructions, a role marker, a chat-template token, an HTML tag,
  a link it is told to fetch), each with the reason it is flagged. The lint scores any server's
  tools with it (docs/lint.md); tether's generators keep such words quoted, never drop them.

Layer 0: the standard library only.
"""

from __future__ import annotations

import html
import re
import unicodedata
from dataclasses import dataclass

MAX_CHARS = 300
"""Most characters of one outside text a tool carries (a quoted passage, a parameter's or a
field's words): a longer one is cut at a word and ends with an ellipsis."""
TEXT_CHARS = 2000
"""Most characters an importer keeps of one outside text it stores whole (a glossary document's
definition, read by search and `tether explain`); what a tool quotes of it is cut to
:data:`MAX_CHARS`."""
NAME_CHARS = 80
"""Most characters of an outside name or title (a glossary heading, a metric label, a summary
used as a tool's title)."""
ELLIPSIS = "…"
SPEAKERS: dict[str, str] = {
    "dbt": "The dbt project",
    "glossary_dir": "its glossary document",
    "openapi_summary": "the API's summary",
    "openapi_description": "the API's description",
}
"""Who a quotation names, by where the words were read (a dbt model's or metric's description, a
glossary document's definition, an API operation's summary or description)."""

_COMMENT = re.compile(r"<!--.*?(-->|$)", re.S)
_RAW = re.compile(r"<\s*(script|style|template|noscript|iframe|object|embed|svg|math|head|title)"
                  r"\b[^>]*>.*?(<\s*/\s*\1\s*>|$)", re.S | re.I)
"""Elements whose content is code or hidden, not prose: the element goes with its content (one
never closed takes the rest of the text with it)."""
_IMAGE = re.compile(r"!\[([^\]]*)\]\([^)]*\)")
_LINK = re.compile(r"\[([^\]]+)\]\([^)]*\)")
_REF_LINK = re.compile(r"\[([^\]]+)\]\[[^\]]*\]")
_LINK_DEF = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*\S+.*$", re.M)
_AUTOLINK = re.compile(r"<((?:https?|mailto|ftp):[^<>\s]+)>", re.I)
_TAG = re.compile(r"</?([A-Za-z][A-Za-z0-9:-]*)(\s[^<>]*)?/?>|<[!?][^<>]*>")
"""A tag as an HTML parser reads one: a letter right after ``<`` (``x < y and z > 1`` is no
tag)."""
_INLINE = frozenset({"a", "abbr", "b", "bdi", "bdo", "cite", "code", "del", "dfn", "em", "i",
                     "ins", "kbd", "mark", "q", "s", "samp", "small", "span", "strong", "sub",
                     "sup", "u", "var"})
"""Tags inside a word or phrase: removed without a space (``<b>bold</b>,`` is ``bold,``)."""
_TOKENS = re.compile(r"<\|[^<>|\s]{1,40}\|>|\[/?INST\]|<</?SYS>>")
"""Chat-template tokens (``<|im_start|>``, ``[INST]``): markup for a model, never content."""
_LINE_MARKS = re.compile(r"^\s{0,3}(#{1,6}\s+|>+\s?|[-*+]\s+|(```|~~~).*$|([-*_]\s*){3,}$)",
                         re.M)
_BOLD = re.compile(r"\*\*(?=\S)(.+?)(?<=\S)\*\*")
_HIDDEN = frozenset({"Cc", "Cf", "Co", "Cs"})
"""Unicode categories never shown as text: controls, format characters (zero-width spaces and
joiners, bidi overrides and isolates, the tag characters that hide ASCII), private use and
surrogates."""


def _markup(text: str) -> str:
    """One pass of markup removal; line structure is kept for the Markdown line marks."""
    text = _TOKENS.sub(" ", _RAW.sub(" ", _COMMENT.sub(" ", text)))
    text = _IMAGE.sub(r"\1", text)
    text = _REF_LINK.sub(r"\1", _LINK.sub(r"\1", text))
    text = _LINK_DEF.sub(" ", _AUTOLINK.sub(r"\1", text))
    text = _TAG.sub(lambda m: "" if (m.group(1) or "").lower() in _INLINE else " ", text)
    return _BOLD.sub(r"\1", _LINE_MARKS.sub("", text))


_SPACES = "\t\n\r\x0b\x0c"


def _visible(text: str) -> str:
    """``text`` without invisible characters; line breaks stay (Markdown's line marks are read
    by line), other white space controls become spaces."""
    return "".join(ch if ch == "\n" else " " if ch in _SPACES else ch for ch in text
                   if ch in _SPACES or not (unicodedata.category(ch) in _HIDDEN
                                            or 0xE0100 <= ord(ch) <= 0xE01EF))


def cut(text: str, limit: int = MAX_CHARS) -> str:
    """``text`` at most ``limit`` characters: cut at the last word that fits, with an ellipsis."""
    if len(text) <= limit:
        return text
    head = text[:max(limit - 1, 1)]
    if " " in head[limit // 2:]:
        head = head[:head.rindex(" ")]
    return head.rstrip(" ,;:-") + ELLIPSIS


def clean(text: object, limit: int = MAX_CHARS) -> str:
    """Outside words as plain text: markup and invisible characters out, whitespace folded,
    at most ``limit`` characters. Entities are decoded before tags are stripped, and again until
    nothing changes, so ``&lt;script&gt;`` cannot slip through as text."""
    out = _visible(str(text or ""))
    for _ in range(4):
        stripped = _markup(html.unescape(out))
        if stripped == out:
            break
        out = stripped
    return cut(" ".join(_visible(out).split()), limit)


def quoted(text: object, limit: int = MAX_CHARS) -> str:
    """``“{words}”``: the words cleaned (:func:`clean`), any curly quotes in them made straight
    so the quotation cannot be closed from inside, without a final period; empty when no words
    are left."""
    words = clean(text, limit).replace("“", '"').replace("”", '"').rstrip(" .")
    return f"“{words}”" if words else ""


def quote(text: object, speaker: str, limit: int = MAX_CHARS) -> str:
    """``{speaker} says: “{words}”`` (:func:`quoted`); empty when no words are left. The caller
    ends the sentence: its period falls after the closing quote, so a quotation of several
    sentences stays attributed in each."""
    words = quoted(text, limit)
    return f"{speaker} says: {words}" if words else ""


@dataclass(frozen=True)
class Sign:
    """A shape of text that speaks to a model, and why it is flagged."""

    name: str
    pattern: re.Pattern[str]
    reason: str


def _rx(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern, re.I)


INSTRUCTION_SIGNS: tuple[Sign, ...] = (
    Sign("override", _rx(r"\b(ignore|disregard|forget|override|bypass)\b(\s+\w+){0,3}?\s+"
                         r"(instructions?|prompts?|rules|directions|guidelines|context)\b"),
         "tells the model to set aside its instructions"),
    Sign("new_instructions", _rx(r"\b(new|updated|real|actual|hidden|secret)\s+instructions?\b|"
                           r"\bfrom now on\b|\bpretend (to be|that|you)\b|\byou are now\b"),
         "gives the model new instructions"),
    Sign("you_must", _rx(r"\byou (must|should|have to|need to|are required to|will) (always |"
                         r"never |not |now |first )?(ignore|disregard|forget|obey|follow|tell|say|"
                         r"answer|respond|reply|reveal|repeat|print|output|call|invoke|run|"
                         r"execute|fetch|visit|open|send|email|pretend|act|stop|refuse)\b"),
         "commands the model what to do"),
    Sign("hide_from_user", _rx(r"\b(do not|don't|never|without)\s+(tell|telling|inform|informing|"
                               r"mention|mentioning|reveal|revealing|show|showing|alert|alerting|"
                               r"let)\b(\s+\w+){0,2}?\s+(the\s+)?users?\b"),
         "asks the model to keep something from the user"),
    Sign("secrecy", _rx(r"\b(do not|don't|never)\s+(mention|reveal|disclose)\s+(that|this|it|"
                        r"anything|these)\b"),
         "asks the model to keep quiet about what it does"),
    Sign("system_prompt", _rx(r"\b(system|developer)\s+(prompt|message|instructions?)\b"),
         "talks about the model's own prompt"),
    Sign("role_marker", _rx(r"(^|[.!?;\"“(\[]\s*)(system|assistant|developer|human)\s*:"),
         "carries a chat role marker"),
    Sign("template_token", _rx(r"<\|[a-z_]+\|>|\[/?INST\]|<</?SYS>>|^\s*###\s*"
                               r"(instruction|system|response)\b"),
         "carries a chat-template token"),
    Sign("html", _rx(r"<\s*/?\s*(script|style|iframe|img|a|object|embed|svg|link|meta|form|"
                     r"input|button|html|body|head|div|span|p|br|important|instructions?|"
                     r"system|secret|hidden)\b[^<>]*>|javascript:|"
                     r"\bon(load|error|click|mouseover)\s*="),
         "carries HTML markup, script or a pseudo-tag such as <IMPORTANT>"),
    Sign("markdown_image", _rx(r"!\[[^\]]*\]\([^)]*\)"),
         "carries a Markdown image (a client may fetch its URL)"),
    Sign("fetch_link", _rx(r"\b(fetch|visit|browse|open|navigate to|go to|download|load|curl|"
                           r"send (it|them|this|the \w+) to|post (it|them|this) to|request)\b"
                           r"[^.!?]{0,40}?\bhttps?://"),
         "tells the model to fetch a URL"),
    Sign("secret_files", _rx(r"~/\.(ssh|aws|cursor|config|gnupg|kube|docker|netrc)\b|"
                             r"\bid_(rsa|ed25519|ecdsa)\b|/etc/(passwd|shadow)\b|\bmcp\.json\b"),
         "points the model at secret files"),
    Sign("hidden_text", re.compile("[\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u2069"
                                   "\ufeff\U000e0000-\U000e007f]"),
         "carries invisible characters (zero-width, bidi override or tag characters)"),
)
"""What text that speaks to a model looks like (docs/lint.md lists them). Ordinary data
descriptions ("Must be positive", "Use ISO 8601", "see https://...") match none."""


def instruction_signs(text: object) -> list[Sign]:
    """The signs ``text`` shows, in :data:`INSTRUCTION_SIGNS` order."""
    s = str(text or "")
    return [sign for sign in INSTRUCTION_SIGNS if sign.pattern.search(s)]
