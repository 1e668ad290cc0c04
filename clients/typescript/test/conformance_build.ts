/**
 * Build cases of the conformance suite (tests/conformance/README.md, "A Build case"): the request
 * this client's builders make of a language-neutral description, compared with the case's as
 * protos. Nothing is called.
 */
import { join } from "node:path";
import { equals, fromJson, toJson, type JsonValue } from "@bufbuild/protobuf";
import {
  CallModelRequestSchema,
  CallModelResponseSchema,
  ExecuteToolResponseSchema,
  ToolCallSchema,
  type CallModelRequest,
  type Message,
  type Part,
} from "../src/gen/sidecar/v1/sidecar_pb.js";
import {
  ToolOutcome,
  assistant,
  cacheBreakpoint,
  documentPart,
  imagePart,
  providerOptions,
  reasoning,
  textPart,
  toolChoice,
  toolResult,
  toolResults,
  user,
  type CacheInput,
  type Detail,
  type DocumentInput,
  type Effort,
  type ImageInput,
} from "../src/index.js";

type Json = Record<string, unknown>;

interface SourceSpec {
  data?: string;
  url?: string;
  file?: string;
  text?: string;
  media_type?: string;
  detail?: Detail;
  title?: string;
  cache?: CacheInput;
}

/** `{ request }` built, or `{ refused }` with the builder's error. */
export function observeBuild(request: JsonValue, build: Json, casesDir: string): Json {
  const files = join(casesDir, "files");
  const base = fromJson(CallModelRequestSchema, request);
  let req: CallModelRequest;
  try {
    const messages = ((build.messages ?? []) as Json[]).map((step) => buildStep(step, files));
    req = { ...base, messages: [...base.messages, ...messages] };
    applyOptions(req, (build.options ?? {}) as Json);
  } catch (err) {
    if (err instanceof Error && err.message.startsWith("sidecar:")) return { refused: err.message };
    throw err;
  }
  return { request: toJson(CallModelRequestSchema, req) as Json };
}

const bytes = (b64: string) => Uint8Array.from(Buffer.from(b64, "base64"));

function image(s: SourceSpec, files: string): ImageInput {
  const extra = s.media_type !== undefined || s.detail !== undefined || s.cache !== undefined;
  if (!extra) {
    if (s.file !== undefined) return { path: join(files, s.file) };
    return s.url !== undefined ? s.url : bytes(s.data!);
  }
  const source = s.file !== undefined ? { path: join(files, s.file) } : s.url !== undefined ? { url: s.url } : { data: bytes(s.data!) };
  return imagePart({ ...source, mediaType: s.media_type, detail: s.detail, cache: s.cache });
}

function documentOf(s: SourceSpec, files: string): DocumentInput {
  const extra = s.media_type !== undefined || s.title !== undefined || s.cache !== undefined;
  if (!extra) {
    if (s.file !== undefined) return { path: join(files, s.file) };
    if (s.text !== undefined) return { text: s.text };
    return s.url !== undefined ? s.url : bytes(s.data!);
  }
  const more = { mediaType: s.media_type, title: s.title, cache: s.cache };
  if (s.text !== undefined) return documentPart({ text: s.text, ...more });
  if (s.file !== undefined) return documentPart({ path: join(files, s.file), ...more });
  return documentPart(s.url !== undefined ? { url: s.url, ...more } : { data: bytes(s.data!), ...more });
}

function buildStep(step: Json, files: string): Message {
  if ("assistant" in step) return assistant(fromJson(CallModelResponseSchema, step.assistant as JsonValue));
  if ("tool_results" in step) {
    const results = (step.tool_results as Json[]).map((r) => {
      const call = fromJson(ToolCallSchema, r.call as JsonValue);
      const images = ((r.images ?? []) as SourceSpec[]).map((s) => image(s, files));
      const image_ = images.length ? images : undefined;
      if ("outcome" in r) {
        const outcome = new ToolOutcome(fromJson(ExecuteToolResponseSchema, r.outcome as JsonValue), call.id, call.name);
        return toolResult(call, outcome, { image: image_ });
      }
      return toolResult(call, r.content as string, { isError: Boolean(r.is_error), image: image_ });
    });
    return toolResults(results);
  }
  const parts: Part[] = ((step.parts ?? []) as Json[]).map((p) => {
    if ("image" in p) return imagePart(image(p.image as SourceSpec, files));
    if ("document" in p) return documentPart(documentOf(p.document as SourceSpec, files));
    return textPart(p.text as string, { cache: p.cache as CacheInput | undefined });
  });
  const images = ((step.images ?? []) as SourceSpec[]).map((s) => image(s, files));
  const documents = ((step.documents ?? []) as SourceSpec[]).map((s) => documentOf(s, files));
  return user(step.user as string, {
    image: images.length ? images : undefined,
    document: documents.length ? documents : undefined,
    parts,
    cache: step.cache as CacheInput | undefined,
  });
}

/** The neutral options, set through this client's helpers and the request's init fields. */
function applyOptions(req: CallModelRequest, options: Json): void {
  for (const [key, v] of Object.entries(options)) {
    switch (key) {
      case "reasoning":
        req.reasoning = reasoning(v as Effort | number);
        break;
      case "tool_choice":
        req.toolChoice = toolChoice(v as string);
        break;
      case "parallel_tool_calls":
        req.parallelToolCalls = v as boolean;
        break;
      case "stop":
        req.stop = v as string[];
        break;
      case "top_p":
        req.topP = v as number;
        break;
      case "top_k":
        req.topK = v as number;
        break;
      case "seed":
        req.seed = BigInt(v as number);
        break;
      case "presence_penalty":
        req.presencePenalty = v as number;
        break;
      case "frequency_penalty":
        req.frequencyPenalty = v as number;
        break;
      case "end_user":
        req.endUser = v as string;
        break;
      case "system_cache":
        req.systemCache = cacheBreakpoint(v as CacheInput);
        break;
      case "provider_options":
        req.providerOptionsJson = providerOptions(v as Record<string, unknown>);
        break;
      default:
        throw new Error(`unknown option ${key}`);
    }
  }
}

/** The request built against the case's, as protos; each differing field named by its path. */
export function checkBuild(expect: Json, observed: Json): string[] {
  if (expect.refused === true) return observed.refused ? [] : ["refused: want the builder to refuse, it built a request"];
  if (observed.refused) return [`request: the builder refused: ${String(observed.refused)}`];
  const want = fromJson(CallModelRequestSchema, expect.request as JsonValue);
  const got = fromJson(CallModelRequestSchema, observed.request as JsonValue);
  if (equals(CallModelRequestSchema, want, got)) return [];
  const problems = differences("request", toJson(CallModelRequestSchema, want), toJson(CallModelRequestSchema, got));
  return problems.length ? problems : ["request: the protos differ"];
}

function differences(at: string, want: unknown, got: unknown): string[] {
  const object = (v: unknown): v is Json => v !== null && typeof v === "object" && !Array.isArray(v);
  if (object(want) && object(got)) {
    const keys = [...new Set([...Object.keys(want), ...Object.keys(got)])].sort();
    return keys.flatMap((k) => differences(`${at}.${k}`, want[k], got[k]));
  }
  if (Array.isArray(want) && Array.isArray(got) && want.length === got.length) {
    return want.flatMap((w, i) => differences(`${at}[${i}]`, w, got[i]));
  }
  const w = JSON.stringify(want);
  const g = JSON.stringify(got);
  return w === g ? [] : [`${at}: want ${w}, got ${g}`];
}
