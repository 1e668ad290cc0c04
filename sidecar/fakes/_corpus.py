"""The tool backend's built-in documents and a tiny keyword search over them."""

from __future__ import annotations

import re

__all__ = ["DOCS", "search"]

DOCS: dict[str, dict[str, str]] = {
    doc["id"]: doc
    for doc in [
        {
            "id": "doc-1",
            "title": "gRPC basics",
            "text": "gRPC is a remote procedure call framework built on HTTP/2 and protocol buffers. "
            "Services declare methods in a .proto file and clients call them like local functions.",
        },
        {
            "id": "doc-2",
            "title": "Retries with backoff",
            "text": "Retries recover from transient failures. Use exponential backoff with jitter, cap the "
            "number of attempts, and only retry idempotent operations.",
        },
        {
            "id": "doc-3",
            "title": "Circuit breakers",
            "text": "A circuit breaker stops calling a failing service. After a cooldown a single probe "
            "decides whether the circuit closes again or stays open.",
        },
        {
            "id": "doc-4",
            "title": "OpenTelemetry tracing",
            "text": "OpenTelemetry records traces made of spans. Context propagation links spans across "
            "services so one request can be followed end to end.",
        },
        {
            "id": "doc-5",
            "title": "Rate limits and Retry-After",
            "text": "Servers answer 429 when a client sends too many requests. The Retry-After header says "
            "how many seconds to wait before trying again.",
        },
        {
            "id": "doc-6",
            "title": "Timeouts and deadlines",
            "text": "Every remote call needs a deadline. gRPC propagates deadlines to downstream calls and "
            "cancels the work when the deadline expires.",
        },
        {
            "id": "doc-7",
            "title": "Idempotency keys",
            "text": "An idempotency key lets a server recognise a repeated request, so a retried create "
            "does not create the same resource twice.",
        },
        {
            "id": "doc-8",
            "title": "Structured output",
            "text": "Language models can be asked to answer with JSON matching a schema. Validate the reply "
            "and ask for a correction when required fields are missing.",
        },
        {
            "id": "doc-9",
            "title": "Error taxonomy",
            "text": "Classify failures as correctable, transient or permanent. The model reads a short "
            "message and one line saying whether a retry can help.",
        },
        {
            "id": "doc-10",
            "title": "Sidecar pattern",
            "text": "A sidecar runs next to an application and handles cross-cutting concerns such as "
            "retries, circuit breaking, telemetry and authentication.",
        },
    ]
}

_STOPWORDS = frozenset(
    {
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "by",
        "can",
        "do",
        "does",
        "for",
        "from",
        "how",
        "i",
        "in",
        "is",
        "it",
        "me",
        "of",
        "on",
        "or",
        "please",
        "tell",
        "the",
        "this",
        "to",
        "us",
        "we",
        "what",
        "when",
        "where",
        "which",
        "who",
        "why",
        "with",
        "you",
        "your",
        "about",
        "find",
        "show",
        "get",
        "search",
    }
)
_WORD = re.compile(r"[a-z0-9]+")


def _terms(text: str) -> list[str]:
    return [w for w in _WORD.findall(text.lower()) if w not in _STOPWORDS]


def _stem(word: str) -> str:
    if word.endswith("ies") and len(word) > 4:
        return word[:-3] + "y"
    if word.endswith("s") and not word.endswith("ss") and len(word) > 3:
        return word[:-1]
    return word


def search(query: str, limit: int = 5) -> list[dict[str, str]]:
    """Documents sharing words with ``query``, best first; ``[]`` when none match."""
    wanted = {_stem(t) for t in _terms(query)}
    if not wanted:
        return []
    scored: list[tuple[int, int, dict[str, str]]] = []
    for index, doc in enumerate(DOCS.values()):
        words = [_stem(w) for w in _terms(doc["title"] + " " + doc["title"] + " " + doc["text"])]
        score = sum(1 for w in words if w in wanted)
        if score:
            scored.append((-score, index, doc))
    scored.sort(key=lambda item: (item[0], item[1]))
    return [{"id": d["id"], "title": d["title"], "snippet": d["text"][:120]} for _, _, d in scored[: max(0, limit)]]
