/**
 * The StreamModel half of the TypeScript conformance runner (tests/conformance/README.md,
 * "A StreamModel case"): read the stream through ModelStream, cancel it after
 * cancel_after_events when the case says so, and observe the events' kinds, the restarts,
 * the accumulated text, the final reply or the failure.
 */
import { FinishReason, RestartCause, SidecarError, type CallModelResponse, type ModelStream, type StreamModelEvent } from "../src/index.js";

type Json = Record<string, unknown>;

/** How long the runner polls the fake provider for client_disconnected after a cancel. */
const DISCONNECT_WAIT_MS = 5_000;
const DISCONNECT_POLL_MS = 20;

/** The event oneof's case, in proto field-name form. */
const EVENT_KIND: Record<string, string> = { text: "text", toolCall: "tool_call", restart: "restart", final: "final" };

export interface StreamSetup {
  /** Cancel after this many events; undefined: read to the end. */
  cancelAfter?: number;
  /** The fake provider, asked whether the sidecar left the cancelled request. */
  providerUrl: string;
  model: string;
}

/**
 * Reads the stream; `failed` builds the observation of its failure (the runner's, shared with
 * CallModel), `withReply` adds the final reply's served_by, hops and compaction.
 */
export async function observeStream(
  stream: ModelStream,
  setup: StreamSetup,
  failed: (err: SidecarError) => Json,
  withReply: (observed: Json, reply: CallModelResponse) => Json,
): Promise<Json> {
  const events: StreamModelEvent[] = [];
  let observed: Json = { grpc_code: "OK", outcome: "result", failure: null };
  try {
    for await (const event of stream) {
      events.push(event);
      if (setup.cancelAfter !== undefined && events.length === setup.cancelAfter) stream.cancel();
    }
  } catch (err) {
    if (!(err instanceof SidecarError)) throw err;
    observed = failed(err);
  }
  observed.events = events.map((e) => EVENT_KIND[e.event.case ?? ""] ?? "unknown");
  observed.restarts = events.flatMap((e) =>
    e.event.case === "restart"
      ? [{ cause: RestartCause[e.event.value.cause], reason: e.event.value.reason, attempt: e.event.value.attempt }]
      : [],
  );
  observed.stream_text = stream.text;
  observed.final = null;
  const final = stream.final;
  if (final) {
    observed.result_text = final.message?.text ?? "";
    observed.final = {
      attempts: final.attempts,
      corrections: final.corrections,
      output_budget_raised: final.outputBudgetRaised,
      finish_reason: FinishReason[final.finishReason],
    };
    observed = withReply(observed, final);
  }
  if (setup.cancelAfter !== undefined) observed.provider_disconnected = await providerDisconnected(setup.providerUrl, setup.model);
  return observed;
}

/** Polls the fake provider until its last request for `model` records the client leaving. */
async function providerDisconnected(providerUrl: string, model: string): Promise<boolean> {
  const url = `${providerUrl}/_fake/requests?${new URLSearchParams({ model })}`;
  const deadline = Date.now() + DISCONNECT_WAIT_MS;
  for (;;) {
    const resp = await fetch(url);
    if (!resp.ok) throw new Error(`GET ${url}: HTTP ${resp.status}`);
    const records = (await resp.json()) as Json[];
    if (records.at(-1)?.client_disconnected === true) return true;
    if (Date.now() >= deadline) return false;
    await new Promise((resolve) => setTimeout(resolve, DISCONNECT_POLL_MS));
  }
}

/** failure.stream of an observation: partial_text, reason, deltas_sent; null when absent. */
export function observeStreamDetail(e: SidecarError): Json | null {
  if (e.detail.case !== "stream") return null;
  const d = e.detail.value;
  return { partial_text: d.partialText, reason: d.reason, deltas_sent: d.deltasSent };
}

const same = (a: unknown, b: unknown): boolean => JSON.stringify(a) === JSON.stringify(b);
const show = (v: unknown): string => JSON.stringify(v);

/** Each of `keys` that `want` gives equal, and reason_contains a substring of reason. */
function checkKeys(where: string, want: Json, got: Json, keys: string[]): string[] {
  const problems: string[] = [];
  for (const key of keys) {
    if (key in want && got[key] !== want[key]) problems.push(`${where}.${key}: want ${show(want[key])}, got ${show(got[key])}`);
  }
  if (typeof want.reason_contains === "string" && !String(got.reason ?? "").includes(want.reason_contains)) {
    problems.push(`${where}.reason: want it to contain ${show(want.reason_contains)}, got ${show(got.reason)}`);
  }
  return problems;
}

/** A StreamModel case's events, restarts, stream_text, final and provider_disconnected. */
export function checkStream(expect: Json, observed: Json): string[] {
  const problems: string[] = [];
  for (const key of ["events", "stream_text", "provider_disconnected"]) {
    if (key in expect && !same(expect[key], observed[key])) problems.push(`${key}: want ${show(expect[key])}, got ${show(observed[key])}`);
  }
  if (Array.isArray(expect.restarts)) {
    const want = expect.restarts as Json[];
    const got = (observed.restarts ?? []) as Json[];
    if (want.length !== got.length) problems.push(`restarts: want ${want.length} restarts, got ${got.length}: ${show(got)}`);
    else want.forEach((w, i) => problems.push(...checkKeys(`restarts[${i}]`, w, got[i], ["cause", "reason", "attempt"])));
  }
  if ("final" in expect) {
    const want = expect.final as Json | null;
    const got = (observed.final ?? null) as Json | null;
    if (want === null) {
      if (got !== null) problems.push(`final: want none, got ${show(got)}`);
    } else if (got === null) problems.push(`final: want ${show(want)}, got none`);
    else problems.push(...checkKeys("final", want, got, ["attempts", "corrections", "output_budget_raised", "finish_reason"]));
  }
  return problems;
}

/** failure.stream: null means absent, an object each given key. */
export function checkStreamDetail(want: Json, got: Json): string[] {
  if (!("stream" in want)) return [];
  const w = want.stream as Json | null;
  const g = (got.stream ?? null) as Json | null;
  if (w === null) return g === null ? [] : [`failure.stream: want absent, got ${show(g)}`];
  if (g === null) return [`failure.stream: want ${show(w)}, got absent`];
  return checkKeys("failure.stream", w, g, ["partial_text", "reason", "deltas_sent"]);
}
