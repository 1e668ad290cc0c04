"""The OpenAI Responses vocabulary both halves share: statuses, reasoning items, keys, errors.

What is the same as Chat Completions is ``openai_chat.vocab``'s, imported from there and not copied:
the key (``authorization: Bearer``), the error body and its types by status, the content-policy
refusals (``error_refusal``), ``data:`` URLs, the reasoning budget's effort, the tool-error prefix (a
``function_call_output`` has no is_error flag either), the rate-limit headers.

    status / incomplete_details.reason (wire)   FinishReason (core)      rendered back as
    completed                                   STOP (TOOL_CALLS when    completed
                                                the reply calls tools)
    incomplete, max_output_tokens               LENGTH                   incomplete, max_output_tokens
    incomplete, content_filter                  CONTENT_FILTER (a        incomplete, content_filter
                                                refusal: content_filter)
    a ``refusal`` content part                  the refusal's words      a refusal part, completed

A reply's ``raw_finish`` is the status, or the incomplete reason (``max_output_tokens``).

Reasoning items travel whole, byte-identical: one ``ReasoningPart`` per summary part, the first
carrying the item's id and encrypted content in its ``signature`` (``signature_of``)::

    {"type": "reasoning", "id", "encrypted_content",   ReasoningPart(summary[0].text, "<id> <encrypted_content>"),
     "summary": [{"type": "summary_text", "text"},     ReasoningPart(summary[1].text), ...
     ...]}                                             (no summary: one part, its text "")

A signature that holds no id (another format's, a caller's own) goes as the encrypted content of an
item whose id the sidecar makes (``SIDECAR_ID``, then the part's number), and reads back as the
signature it was: a Responses front hands a client Anthropic's signatures and takes them back so.
Redacted reasoning (another format's ``redacted_data``) goes the same way, under an id of its own
(``REDACTED_ID``), and reads back as the redacted data it was.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from sidecar.core.conversation import ReasoningPart
from sidecar.core.kinds import FinishReason
from sidecar.core.taxonomy import InvalidInput
from sidecar.providers.formats.fields import shown
from sidecar.providers.formats.openai_chat.vocab import effort_for_budget

__all__ = [
    "FINISH_NAMES",
    "FORMAT_NAME",
    "INCLUDE",
    "INCOMPLETE",
    "REDACTED_ID",
    "RESPONSES_PATH",
    "SIDECAR_ID",
    "effort_for_budget",
    "item_of",
    "parts_of_item",
    "refuse_stateful",
    "signature_of",
]

FORMAT_NAME = "openai_responses"
"""The format's name in the configuration (``providers[].wire_format``)."""
RESPONSES_PATH = "/responses"
"""Below the provider's base URL (which ends in ``/v1`` for OpenAI itself)."""
INCLUDE = "reasoning.encrypted_content"
"""What every request includes: the reasoning's encrypted content, so that no turn depends on state held
at the provider (``store: false``)."""
SIDECAR_ID = "rs_sidecar_"
"""The id of a reasoning item the sidecar makes for a signature that holds none (the module's table)."""
REDACTED_ID = "rs_redacted_sidecar_"
"""The id of a reasoning item the sidecar makes for redacted reasoning (the module's table)."""

INCOMPLETE: Mapping[str, FinishReason] = {
    "max_output_tokens": FinishReason.LENGTH,
    "content_filter": FinishReason.CONTENT_FILTER,
}
"""``incomplete_details.reason`` as the core's finish."""
FINISH_NAMES: Mapping[FinishReason, str] = {
    FinishReason.LENGTH: "max_output_tokens",
    FinishReason.CONTENT_FILTER: "content_filter",
}
"""The core's finish as an incomplete reason (any other finish: status completed)."""


def signature_of(item_id: str, encrypted: str) -> str:
    """A reasoning item's id and encrypted content as the signature of its first part."""
    if item_id.startswith((SIDECAR_ID, REDACTED_ID)) or not item_id:
        return encrypted
    return f"{item_id} {encrypted}" if encrypted else item_id


def item_of(signature: str, n: int) -> tuple[str, str]:
    """The item id and encrypted content a signature holds (``n``: the part's number, for an id the sidecar
    makes when the signature holds none)."""
    head, space, rest = signature.partition(" ")
    if space and head.startswith("rs_"):
        return head, rest
    if not space and signature.startswith("rs_") and not signature.startswith(SIDECAR_ID):
        return signature, ""
    return f"{SIDECAR_ID}{n}", signature


def parts_of_item(item_id: str, encrypted: str, summaries: Sequence[str], made_by: str = "") -> list[ReasoningPart]:
    """A reasoning item as the core's parts (the module's table): one per summary, the first signed."""
    if item_id.startswith(REDACTED_ID) and encrypted:
        return [ReasoningPart(redacted_data=encrypted, format=made_by)]
    signature = signature_of(item_id, encrypted)
    return [ReasoningPart(t, signature if k == 0 else "", "", made_by) for k, t in enumerate(summaries or [""])]


_STATELESS = {
    "previous_response_id": "the sidecar keeps no responses (it runs stateless): send the whole conversation "
    "in input, the reasoning items with their encrypted_content",
    "conversation": "the sidecar keeps no conversations (it runs stateless): send the whole conversation in input",
    "background": "the sidecar answers in the request (it keeps no responses to poll): leave background out",
    "store": "must be false: the sidecar keeps no responses (it runs stateless), so none could be retrieved",
}


def refuse_stateful(body: Mapping[str, Any]) -> None:
    """INVALID_INPUT naming a request key that asks the sidecar to keep a response or a conversation (before the
    shape's check, so that such a key is refused with the reason whatever its value)."""
    for key, why in _STATELESS.items():
        if body.get(key) not in (None, False):
            raise InvalidInput(key, shown(body[key]), why)
