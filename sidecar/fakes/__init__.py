"""Fake upstreams on loopback HTTP: an LLM provider and a tool backend.

Both are real HTTP/1.1 servers (asyncio + h11, keep-alive), scriptable over HTTP,
so tests in any language can drive them.  Python use::

    with ThreadedServer(FakeProvider()) as prov, ThreadedServer(FakeToolBackend()) as tools:
        prov.url                      # "http://127.0.0.1:<ephemeral port>"
        prov.server.script("gpt-x", [{"preset": "rate_limit", "retry_after": "0"}])
        ...
        prov.server.requests(model="gpt-x")   # recorded requests, as dicts

    async with FakeProvider() as prov:      # or: await prov.start(); ...; await prov.stop()
        prov.url

Constructors: ``FakeProvider(host="127.0.0.1", port=0, *, chaos=None, max_records=10000)``
(``chaos``: a mapping like the ``/_fake/chaos`` body, or a ``ChaosConfig``);
``FakeToolBackend(host="127.0.0.1", port=0, *, max_records=10000)``;
``ThreadedServer(server)`` with ``.start()`` (returns itself), ``.stop()``, ``.url``,
``.port``, ``.server`` and ``with`` support.  Python control methods (thread-safe):
``script(key, steps, append=False)``, ``requests(**field_equals)``, ``reset()``,
``wait_for(predicate, timeout=5.0)`` (polls ``requests()``; not from the server's own loop);
``FakeProvider.set_chaos(mapping or **fields)``; ``FakeToolBackend.notes_received``,
``FakeToolBackend.notes_repeated()``.

Control routes (both fakes; never recorded)
-------------------------------------------
``POST /_fake/script``  ``{"model"|"path": KEY, "steps": [STEP...], "append": false}`` -> ``{"ok", "queued"}``.
    The provider keys by the request body's ``model``, the tool backend by request path.
    KEY is exact, or a prefix ending in ``*`` (``*`` alone: any); exact beats prefix, the
    longest prefix wins.  Steps are consumed FIFO; an empty queue means normal behaviour.
    Bad steps (unknown field, preset, fault...) -> 400 ``{"error"}``.
``GET /_fake/requests[?field=value...]``  JSON array, oldest first, of ``{seq, method, path,
    query, headers (lower-case), body (parsed JSON, else text, else null), received_at,
    status_sent (null if no response was started), client_disconnected, fault, source
    ("script" | "default" | "chaos" | ...)}``; the provider adds ``wire`` ("openai" |
    "anthropic"), ``model`` and ``preset``, and for a ``"stream": true`` request ``stream``
    (true) and ``stream_fault``; a response that went out as a stream adds ``chunks_sent``
    (SSE events written; one event per chunk).
``POST /_fake/reset``  clears scripts, records, chaos and notes.  ``GET /_fake/health``.
``POST /_fake/chaos`` (provider) ``{"rate_limit": 0.2, "overload": 0, "server_error": 0.05,
    "reset": 0, "retry_after": "0", "seed": 1}``: fractions of unscripted requests, decided
    by one seeded draw per request (deterministic for a given seed and order).
    ``GET /_fake/chaos`` shows it.
``GET /_fake/notes`` (tool backend) ``{"received", "created", "texts", "repeated": {TEXT: N}}``: every
    ``POST /notes`` counted by its body's ``text`` (whatever was answered), ``repeated`` holding
    each text that arrived more than once: a caller that puts a unique id in the text sees a
    request sent twice; ``keys`` (distinct ``Idempotency-Key`` values seen) and ``replayed``
    (POSTs whose key was seen before: answered the note that key created, none created).
    ``FakeToolBackend.note_keys()`` counts each key.

STEP fields
-----------
``status`` (int), ``headers`` (object), ``body`` (object or string, sent as-is), ``delay_ms``,
``fault`` (``reset``: RST after reading the request; ``hang``: never answer;
``drop_mid_body``: headers and half the body, then close), ``repeat`` (default 1).
A step with neither ``body`` nor an error ``status`` nor a ``preset`` gives the normal
answer (delayed / faulted / with headers as the step says).  While delaying or hanging the
server notices the client leaving and records ``client_disconnected: true``.

Provider only: ``preset`` rendered on the wire of the endpoint hit, plus its parameters
``text``, ``tool_calls`` ([{name, arguments: object | raw string}]), ``finish``
(stop | length | tool_calls | content_filter | refusal), ``retry_after`` (-> ``retry-after``),
``retry_after_ms`` (-> ``retry-after-ms``), ``message`` (error message), ``extra_error_fields``
(merged into the error object), ``extra_body`` (merged at the top level), ``usage``
(``{"cache_read_input_tokens", "cache_write_input_tokens", "reasoning_tokens"}``: the reply, whole or
streamed, reports that many cache-read / cache-write input tokens, the input raised to hold them, and
reasoning tokens, added to the output; each in its wire's own usage fields).  Presets:
``rate_limit`` 429, ``overloaded`` 529, ``server_error`` 500, ``bad_gateway`` 502 (HTML),
``insufficient_quota`` (OpenAI 429 / Anthropic 400 credit balance), ``payment_required`` 402,
``context_too_long`` 400, ``invalid_key`` 401, ``model_not_found`` 404, ``content_policy`` 400
(OpenAI ``content_policy_violation``; Anthropic "Output blocked by content filtering policy"),
``content_filter`` 400 (Azure OpenAI's ``content_filter`` / ``ResponsibleAIPolicyViolation`` with
the step's ``categories`` filtered, default hate; Anthropic as ``content_policy``), ``account_blocked``
(the account may not use the API from here: OpenAI 400 organization not verified, Anthropic 400
organization disabled, Gemini 400 FAILED_PRECONDITION user location, Bedrock 403 no access to the model),
``model_unavailable`` (the model is not served as named: Bedrock 400 on-demand throughput, Azure 400
OperationNotSupported; elsewhere the wire's ``model_not_found``), ``reply``,
``truncated``, ``bad_json``, ``missing_fields``, ``refusal``.  ``categories`` (a list of hate,
jailbreak, self_harm, sexual, violence) also makes an OpenAI reply that finishes ``content_filter``
carry Azure's ``content_filter_results``.  ``status`` overrides a preset's status.
``echo_headers: true`` (no preset, or ``reply``) answers a reply whose text is the request's
headers as they came, a ``name: value`` line each: the credentials the client sent (a key, a SigV4
``Authorization``, a session token), whole or streamed, as an upstream that echoes its request.

Streaming (provider only): a request with ``"stream": true`` gets the same reply as SSE, flushed
event by event over chunked transfer-encoding -- OpenAI ``chat.completion.chunk`` data lines
(role chunk, ``content`` / ``refusal`` / ``tool_calls`` deltas, finish chunk, a usage chunk with
``stream_options.include_usage``, ``[DONE]``); Anthropic ``message_start``, ``content_block_*``
(``text_delta``, ``input_json_delta``), ``ping``, ``message_delta``, ``message_stop``.  Text goes
a word per delta, tool arguments 12 chars per fragment.  Error presets and raw bodies answer JSON
as before the stream would begin.  Stream step fields (ignored without ``stream: true``):
``stream_fault`` (``overloaded`` | ``server_error`` | ``content_policy`` | ``content_filter``: an
error event, then the end; ``drop``: FIN
mid-body; ``reset``: RST mid-body; ``stall``: no bytes for ``stall_ms`` then the rest, or until
the client leaves; ``end_early``: a clean end without finish or end marker; ``no_end_marker``: the
whole reply and its usage, the body ending without ``[DONE]`` / ``message_stop``; ``garbled``: the
next event's data cut in half (``garbled_events``: that many in a row); ``unknown_event``: an
event clients must skip; ``truncated``: the reply stops and finishes ``length`` / ``max_tokens``),
``after_deltas`` (deltas before the fault; default half of them), ``stall_ms``, ``delta_delay_ms``
(a wait before every delta), ``delta_chars`` (fixed-size deltas). ``{"stream_fault": "overloaded",
"after_deltas": 3}`` then ``{}`` queues a failed stream and its clean restart. Details:
:mod:`sidecar.fakes._stream`.

Provider routes: each registered format's (its ``fakes``, in its folder of ``providers/formats/``):
``POST /v1/chat/completions`` (or ``/chat/completions``), ``POST /v1/messages``, Gemini's, Bedrock's,
Responses'; Azure OpenAI's ``POST /openai/deployments/{deployment}/chat/completions?api-version=`` and
``POST /openai/v1/chat/completions`` (``openai_chat/fake_azure.py``: the OpenAI wire,
the deployment as the model, ``api-key`` or a bearer required, Azure's error bodies and headers, a
429's ``x-ms-retry-after-ms``).  ``FakeProvider.limit_requests(limit, clock, window_s=60)`` enforces
a request limit in fixed windows on ``clock`` (a test's fake clock): past it a 429 with
``retry-after``, and every answer tells the budget in its wire's rate-limit headers (``_limits``);
``FakeProvider.rate_limited`` counts the 429s it sent; over HTTP, ``POST /_fake/limit {"requests": 5,
"window_s": 60}`` (real time; ``"requests": null`` lifts it), ``GET /_fake/limit`` shows it.

Unscripted, a deterministic brain answers: one tool call to the first (or forced) tool while no
tool result is in the conversation; then JSON matching the asked schema (OpenAI
``response_format``; a system prompt line ``Respond with a single JSON object matching this JSON
schema:``), else ``"Based on the tool result: <200 chars>"``, else
``"You said: <last user text>"``.  Usage ≈ ceil(chars / 4); ``max_tokens`` cuts the reply.
A conversation that ends with an assistant message (a prefill, on both wires, as Anthropic and
many OpenAI-compatible servers take it) is answered with the rest of the reply it would have got
without it: what follows the prefill (the whole reply when it does not begin with the prefill).
Anthropic's rule holds: a prefill ending in whitespace is a 400.  A step's ``refuse_prefill: true``
answers a prefilled request with a 400 (``invalid_request_error``), as a provider that continues
no assistant message does; an unprefilled one as the step says.

Tool backend routes: ``GET /search?q=&limit=``, ``GET /docs/{id}`` (doc-1..doc-10),
``POST /notes`` (201 ``{"id": "note-N"}``; every request counted), ``GET /notes``,
``GET|POST /fail/{mode}`` with mode in 400 401 403 404 413 422 429 500 502 503 418
throttle401 robot403 reset hang slow empty200 (``?retry_after=`` sets Retry-After,
``?delay_ms=`` changes ``slow``'s 2 s).

CLIs: ``python -m sidecar.fakes.provider`` and ``python -m sidecar.fakes.tool_backend``
print the URL they listen on (``--port 0`` for any free port).
"""

from ._chaos import ChaosConfig
from ._http import Fault, HttpServer, Request, Response
from ._threaded import ThreadedServer
from .provider import FakeProvider
from .tool_backend import FakeToolBackend

__all__ = [
    "ChaosConfig",
    "FakeProvider",
    "FakeToolBackend",
    "Fault",
    "HttpServer",
    "Request",
    "Response",
    "ThreadedServer",
]
