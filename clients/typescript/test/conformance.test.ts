/**
 * The TypeScript client's runner of the one conformance suite
 * (tests/conformance/README.md is the spec). It runs under the harness
 * (tests/conformance/harness.py), which sets SIDECAR_ADDR and the fakes' URLs;
 * without them it is skipped. With CONFORMANCE_REPORT set it appends each case's
 * result to that file, one JSON line (tests/conformance/conformance_report.py).
 */
import assert from "node:assert/strict";
import { appendFileSync, readdirSync, readFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { isDeepStrictEqual } from "node:util";
import { after, describe, it } from "node:test";
import { fromJson, toJson, type JsonValue } from "@bufbuild/protobuf";
import {
  type CallModelResponse,
  CallModelRequestSchema,
  CompactionStrategy,
  CompactionTrigger,
  ClassifyFailureRequestSchema,
  ExecuteToolRequestSchema,
  FailureKind,
  FailureSchema,
  type Hop,
  MessageSchema,
  SidecarClient,
  SidecarError,
  grpcCodeName,
  kindName,
} from "../src/index.js";
import { checkBuild, observeBuild } from "./conformance_build.js";
import { checkStream, checkStreamDetail, observeStream, observeStreamDetail } from "./conformance_stream.js";

type Json = Record<string, unknown>;

interface Call {
  rpc: string;
  request: JsonValue;
}

interface Case extends Call {
  name: string;
  setup?: { tool_backend?: Json[]; provider?: Json[] };
  before?: Call[];
  deadline_ms?: number;
  /** StreamModel: cancel the stream after reading this many events. */
  cancel_after_events?: number;
  /** A Build case: what this client's builders make (conformance_build.ts). */
  build?: Json;
  expect: Json;
}

const DEFAULT_DEADLINE_MS = 15_000;
const env = {
  addr: process.env.SIDECAR_ADDR ?? "",
  FAKE_PROVIDER_URL: process.env.FAKE_PROVIDER_URL ?? "",
  TOOL_BACKEND_URL: process.env.TOOL_BACKEND_URL ?? "",
};
const ready = Boolean(env.addr && env.FAKE_PROVIDER_URL && env.TOOL_BACKEND_URL);
const casesDir = process.env.CONFORMANCE_CASES ?? resolve(import.meta.dirname ?? ".", "../../../../tests/conformance/cases");

function loadCases(): Case[] {
  return readdirSync(casesDir)
    .filter((f) => f.endsWith(".json"))
    .sort()
    .map((f) => JSON.parse(readFileSync(join(casesDir, f), "utf8")) as Case);
}

async function post(url: string, body: unknown): Promise<void> {
  const resp = await fetch(url, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
  await resp.text();
  if (!resp.ok) throw new Error(`POST ${url}: HTTP ${resp.status}`);
}

async function prepareFakes(c: Case): Promise<void> {
  await post(`${env.FAKE_PROVIDER_URL}/_fake/reset`, {});
  await post(`${env.TOOL_BACKEND_URL}/_fake/reset`, {});
  for (const s of c.setup?.tool_backend ?? []) await post(`${env.TOOL_BACKEND_URL}/_fake/script`, s);
  for (const s of c.setup?.provider ?? []) await post(`${env.FAKE_PROVIDER_URL}/_fake/script`, s);
}

function observeError(e: SidecarError): Json {
  const detail = e.detail.case ? FailureSchema.field[e.detail.case]?.name ?? e.detail.case : null;
  return {
    kind: kindName(e.kind),
    correctable: e.correctable,
    message: e.message,
    explanation: e.explanation,
    http: e.http
      ? {
          status_code: e.http.statusCode,
          service: e.http.service,
          endpoint: e.http.endpoint,
          body: e.http.body,
          retry_after_raw: e.http.retryAfterRaw ?? null,
        }
      : null,
    retry_after_seconds: e.retryAfterMs === undefined ? null : e.retryAfterMs / 1000,
    attempts: e.attempts,
    detail,
    stream: observeStreamDetail(e),
  };
}

/** A failed CallModel or StreamModel: its status, failure and the route's story. */
function failedModelCall(err: SidecarError): Json {
  return withRoute({ grpc_code: grpcCodeName(err.grpcCode), outcome: "failure", failure: observeError(err) }, "", err.hops);
}

async function observe(client: SidecarClient, call: Call & { cancel_after_events?: number }, timeoutMs: number): Promise<Json> {
  try {
    if (call.rpc === "ExecuteTool") {
      const outcome = await client.executeTool(fromJson(ExecuteToolRequestSchema, call.request), { timeoutMs });
      const failure = outcome.failure;
      return failure
        ? { grpc_code: "OK", outcome: "failure", failure: observeError(failure), model_text: outcome.modelText }
        : { grpc_code: "OK", outcome: "result", result_text: outcome.result?.content ?? "", model_text: outcome.modelText };
    }
    if (call.rpc === "CallModel") {
      try {
        const reply = await client.callModel(fromJson(CallModelRequestSchema, call.request), { timeoutMs });
        return withReply({ grpc_code: "OK", outcome: "result", result_text: reply.message?.text ?? "" }, reply);
      } catch (err) {
        if (!(err instanceof SidecarError)) throw err;
        return failedModelCall(err);
      }
    }
    if (call.rpc === "StreamModel") {
      const request = fromJson(CallModelRequestSchema, call.request);
      const setup = { cancelAfter: call.cancel_after_events, providerUrl: env.FAKE_PROVIDER_URL, model: request.model };
      return await observeStream(client.streamModel(request, { timeoutMs }), setup, failedModelCall, withReply);
    }
    if (call.rpc === "ClassifyFailure") {
      const f = await client.classifyFailure(fromJson(ClassifyFailureRequestSchema, call.request), { timeoutMs });
      return {
        grpc_code: "OK",
        outcome: f.kind === FailureKind.UNSPECIFIED ? "result" : "failure",
        failure: observeError(SidecarError.fromFailure(f)),
      };
    }
  } catch (err) {
    if (!(err instanceof SidecarError)) throw err;
    return { grpc_code: grpcCodeName(err.grpcCode), outcome: "failure", failure: observeError(err) };
  }
  throw new Error(`unknown rpc ${call.rpc}`);
}

/** A CallModel's served_by and hops, added to its observation (a route's story). */
function withRoute(observed: Json, servedBy: string, hops: Hop[]): Json {
  const listed = hops.map((h) => ({
    deployment: h.deployment,
    kind: kindName(h.kind),
    attempts: h.attempts,
    skipped: h.skipped,
    reason: h.reason,
    hedge: h.hedge,
    cancelled: h.cancelled,
  }));
  return { ...observed, served_by: servedBy, hops: listed };
}

/** A reply's route story and compaction (null when it compacted nothing; messages as canonical proto3 JSON). */
function withReply(observed: Json, reply: CallModelResponse): Json {
  const c = reply.compaction;
  const compaction = c
    ? {
        trigger: CompactionTrigger[c.trigger],
        tokens_before: c.tokensBefore,
        tokens_after: c.tokensAfter,
        steps: c.steps.map((s) => ({
          strategy: CompactionStrategy[s.strategy],
          turns: [...s.turns],
          tokens_before: s.tokensBefore,
          tokens_after: s.tokensAfter,
        })),
        messages: c.messages.map((m) => toJson(MessageSchema, m)),
        summarizer_calls: c.summarizerCalls,
      }
    : null;
  return { ...withRoute(observed, reply.servedBy, reply.hops), compaction };
}

/** compaction: null absent; an object present with each given key equal, steps as many as listed, messages as JSON. */
function checkCompaction(expect: Json, observed: Json): string[] {
  if (!("compaction" in expect)) return [];
  const show = (v: unknown) => JSON.stringify(v);
  const want = expect.compaction as Json | null;
  const got = (observed.compaction ?? null) as Json | null;
  if (want === null) return got === null ? [] : [`compaction: want none, got ${show(got)}`];
  if (got === null) return [`compaction: want ${show(want)}, got none`];
  const problems: string[] = [];
  for (const key of ["trigger", "tokens_before", "tokens_after", "summarizer_calls", "messages"]) {
    if (key in want && !isDeepStrictEqual(got[key], want[key])) {
      problems.push(`compaction.${key}: want ${show(want[key])}, got ${show(got[key])}`);
    }
  }
  if (!Array.isArray(want.steps)) return problems;
  const wantSteps = want.steps as Json[];
  const gotSteps = (got.steps ?? []) as Json[];
  if (wantSteps.length !== gotSteps.length) {
    return [...problems, `compaction.steps: want ${wantSteps.length} steps, got ${gotSteps.length}: ${show(gotSteps)}`];
  }
  wantSteps.forEach((w, i) => {
    for (const key of ["strategy", "turns", "tokens_before", "tokens_after"]) {
      if (key in w && !isDeepStrictEqual(gotSteps[i][key], w[key])) {
        problems.push(`compaction.steps[${i}].${key}: want ${show(w[key])}, got ${show(gotSteps[i][key])}`);
      }
    }
  });
  return problems;
}

/** served_by equal; hops as many as listed, each given key equal (reason_contains: a substring). */
function checkRoute(expect: Json, observed: Json): string[] {
  const problems: string[] = [];
  if ("served_by" in expect && observed.served_by !== expect.served_by) {
    problems.push(`served_by: want ${JSON.stringify(expect.served_by)}, got ${JSON.stringify(observed.served_by)}`);
  }
  if (!Array.isArray(expect.hops)) return problems;
  const want = expect.hops as Json[];
  const got = (observed.hops ?? []) as Json[];
  if (want.length !== got.length) {
    problems.push(`hops: want ${want.length} hops, got ${got.length}: ${JSON.stringify(got)}`);
    return problems;
  }
  want.forEach((w, i) => {
    for (const key of ["deployment", "kind", "attempts", "skipped", "reason", "hedge", "cancelled"]) {
      if (key in w && got[i][key] !== w[key]) {
        problems.push(`hops[${i}].${key}: want ${JSON.stringify(w[key])}, got ${JSON.stringify(got[i][key])}`);
      }
    }
    if (typeof w.reason_contains === "string" && !String(got[i].reason ?? "").includes(w.reason_contains)) {
      problems.push(`hops[${i}].reason: want it to contain ${JSON.stringify(w.reason_contains)}, got ${JSON.stringify(got[i].reason)}`);
    }
  });
  return problems;
}

function expand(value: unknown): unknown {
  if (typeof value === "string") {
    return value.replaceAll("${FAKE_PROVIDER_URL}", env.FAKE_PROVIDER_URL).replaceAll("${TOOL_BACKEND_URL}", env.TOOL_BACKEND_URL);
  }
  if (Array.isArray(value)) return value.map(expand);
  if (value !== null && typeof value === "object") {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, expand(v)]));
  }
  return value;
}

function check(expect: Json, observed: Json): string[] {
  const problems: string[] = [];
  const differ = (what: string, want: unknown, got: unknown) =>
    problems.push(`${what}: want ${JSON.stringify(want)}, got ${JSON.stringify(got)}`);
  if (observed.grpc_code !== expect.grpc_code) differ("grpc_code", expect.grpc_code, observed.grpc_code);
  if ("outcome" in expect && observed.outcome !== expect.outcome) differ("outcome", expect.outcome, observed.outcome);
  if ("failure" in expect) {
    const want = expect.failure as Json | null;
    const got = (observed.failure ?? null) as Json | null;
    if (want === null) {
      if (got !== null) differ("failure", null, got);
    } else if (got === null) differ("failure", want, null);
    else problems.push(...checkFailure(want, got));
  }
  for (const [key, field] of [
    ["result_contains", "result_text"],
    ["model_text_contains", "model_text"],
  ] as const) {
    if (typeof expect[key] === "string" && !String(observed[field] ?? "").includes(expect[key] as string)) {
      problems.push(`${field}: want it to contain ${JSON.stringify(expect[key])}, got ${JSON.stringify(observed[field])}`);
    }
  }
  if ("model_text" in expect && observed.model_text !== expect.model_text) differ("model_text", expect.model_text, observed.model_text);
  problems.push(...checkRoute(expect, observed));
  problems.push(...checkCompaction(expect, observed));
  problems.push(...checkStream(expect, observed));
  return problems;
}

function checkFailure(want: Json, got: Json): string[] {
  const problems: string[] = [];
  for (const key of ["kind", "correctable", "message", "explanation", "attempts", "detail"]) {
    if (key in want && got[key] !== want[key]) {
      problems.push(`failure.${key}: want ${JSON.stringify(want[key])}, got ${JSON.stringify(got[key])}`);
    }
  }
  for (const key of ["message", "explanation"]) {
    const part = want[`${key}_contains`];
    if (typeof part === "string" && !String(got[key] ?? "").includes(part)) {
      problems.push(`failure.${key}: want it to contain ${JSON.stringify(part)}, got ${JSON.stringify(got[key])}`);
    }
  }
  if ("http" in want) {
    const w = want.http as Json | null;
    const g = got.http as Json | null;
    if (w === null) {
      if (g !== null) problems.push(`failure.http: want absent, got ${JSON.stringify(g)}`);
    } else if (g === null) problems.push(`failure.http: want ${JSON.stringify(w)}, got absent`);
    else {
      for (const [key, value] of Object.entries(w)) {
        if (g[key] !== value) problems.push(`failure.http.${key}: want ${JSON.stringify(value)}, got ${JSON.stringify(g[key])}`);
      }
    }
  }
  problems.push(...checkStreamDetail(want, got));
  if ("retry_after_seconds" in want) {
    const w = want.retry_after_seconds as number | null;
    const g = got.retry_after_seconds as number | null;
    if (w === null) {
      if (g !== null) problems.push(`failure.retry_after_seconds: want absent, got ${g}`);
    } else if (g === null || Math.abs(g - w) > 1e-3) problems.push(`failure.retry_after_seconds: want ${w}, got ${g}`);
  }
  return problems;
}

/** Appends one line to CONFORMANCE_REPORT, when the harness set it. */
function report(name: string, problems: string[], startMs: number): void {
  const path = process.env.CONFORMANCE_REPORT;
  if (!path) return;
  const line = { name, passed: problems.length === 0, problems, start_ms: startMs, end_ms: Date.now() };
  appendFileSync(path, `${JSON.stringify(line)}\n`);
}

describe("conformance", { skip: ready ? false : "no sidecar: run tests/conformance/harness.py" }, () => {
  if (!ready) {
    if (process.env.CONFORMANCE_REQUIRED) throw new Error("CONFORMANCE_REQUIRED is set but SIDECAR_ADDR or the fakes' URLs are not");
    return;
  }
  const client = new SidecarClient(env.addr);
  after(() => client.close());
  for (const c of loadCases()) {
    it(c.name, async () => {
      const startMs = Date.now();
      let problems = ["the case stopped before its comparison (see the runner's output)"];
      try {
        if (c.rpc === "Build") {
          const observed = observeBuild(c.request, c.build ?? {}, casesDir);
          problems = checkBuild(expand(c.expect) as Json, observed);
          assert.deepEqual(problems, [], `${problems.join("\n")}\nobserved: ${JSON.stringify(observed)}`);
          return;
        }
        await prepareFakes(c);
        const timeoutMs = c.deadline_ms ?? DEFAULT_DEADLINE_MS;
        for (const b of c.before ?? []) await observe(client, b, timeoutMs);
        const observed = await observe(client, c, timeoutMs);
        problems = check(expand(c.expect) as Json, observed);
        assert.deepEqual(problems, [], `${problems.join("\n")}\nobserved: ${JSON.stringify(observed)}`);
      } catch (err) {
        if (!(err instanceof assert.AssertionError)) problems = [String(err)];
        throw err;
      } finally {
        report(c.name, problems, startMs);
      }
    });
  }
});
