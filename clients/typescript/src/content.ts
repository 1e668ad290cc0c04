/**
 * Content parts — text, images and documents — built from what an agent has at hand, the
 * assistant turn that passes a reply's reasoning back, and the request's controls.
 *
 *   user("what is this?", { image: { path: "shot.png" } })         // a file: its bytes, media type sniffed
 *   user("compare them", { image: [pngBytes, "https://example.com/b.jpg"] })
 *   user("summarise", { document: { path: "report.pdf", title: "Q3" }, cache: "1h" })
 *   messages.push(assistant(reply));                                // reasoning unchanged (signed)
 *   sidecar.callModel({ model, messages, reasoning: reasoning(2048), toolChoice: toolChoice("required") });
 *
 * A source is bytes (a Uint8Array), `{ path }` (a file's bytes), or a string, which is always a URL
 * (https://, http:// or data:; a file is `{ path }`, so a name is never taken for one). Media types
 * come from the bytes (PNG, JPEG, GIF, WebP and PDF signatures), then from the file's suffix; what
 * neither tells is refused here, never sent untyped. A document file that is text (.txt, .md) is
 * sent as a text document. `cache`: true (the provider's default lifetime), "5m" or "1h".
 */
import { readFileSync } from "node:fs";
import { extname } from "node:path";
import { clone, create, isMessage } from "@bufbuild/protobuf";
import {
  CacheBreakpointSchema,
  CacheTtl,
  DocumentPartSchema,
  ImageDetail,
  ImagePartSchema,
  MessageSchema,
  PartSchema,
  ReasoningEffort,
  ReasoningPartSchema,
  ReasoningSchema,
  Role,
  ToolCallResultSchema,
  ToolCallSchema,
  ToolChoiceMode,
  ToolChoiceSchema,
  type CacheBreakpoint,
  type CallModelResponse,
  type DocumentPart,
  type ImagePart,
  type Message,
  type Part,
  type Reasoning,
  type ToolCall,
  type ToolCallResult,
  type ToolChoice,
} from "./gen/sidecar/v1/sidecar_pb.js";
import { ToolOutcome } from "./tool.js";

export const MEDIA_TYPE_PDF = "application/pdf";
export const MEDIA_TYPE_TEXT = "text/plain";
const URL_PREFIXES = ["https://", "http://", "data:"];
const IMAGE_SUFFIXES: Record<string, string> = {
  ".png": "image/png",
  ".jpg": "image/jpeg",
  ".jpeg": "image/jpeg",
  ".gif": "image/gif",
  ".webp": "image/webp",
};
const TEXT_SUFFIXES = [".txt", ".text", ".md", ".markdown"];
const DETAILS = { auto: ImageDetail.AUTO, low: ImageDetail.LOW, high: ImageDetail.HIGH } as const;
const EFFORTS = {
  minimal: ReasoningEffort.MINIMAL,
  low: ReasoningEffort.LOW,
  medium: ReasoningEffort.MEDIUM,
  high: ReasoningEffort.HIGH,
} as const;

/** A cache breakpoint: true (the provider's default lifetime), "5m", "1h", or one as it is. */
export type CacheInput = boolean | "5m" | "1h" | CacheBreakpoint;
/** How closely the model looks at an image. */
export type Detail = keyof typeof DETAILS;
/** A reasoning level. */
export type Effort = keyof typeof EFFORTS;

type Source =
  | { data: Uint8Array; url?: never; path?: never }
  | { url: string; data?: never; path?: never }
  | { path: string; data?: never; url?: never };
/** An image with what goes with it. */
export type ImageSpec = Source & { mediaType?: string; detail?: Detail; cache?: CacheInput };
/** An image: bytes, a URL, an ImageSpec, or a part as it is. */
export type ImageInput = Uint8Array | string | ImageSpec | Part | ImagePart;
/** A document with what goes with it: a PDF (data, url or path) or plain text. */
export type DocumentSpec = (
  | (Source & { text?: never })
  | { text: string; data?: never; url?: never; path?: never }
) & {
  mediaType?: string;
  title?: string;
  cache?: CacheInput;
};
/** A document: PDF bytes, a URL, a DocumentSpec, or a part as it is. */
export type DocumentInput = Uint8Array | string | DocumentSpec | Part | DocumentPart;
/** What a user turn holds beside its text. */
export interface UserContent {
  image?: ImageInput | readonly ImageInput[];
  document?: DocumentInput | readonly DocumentInput[];
  parts?: readonly Part[];
  /** The message's last part is a cache breakpoint. */
  cache?: CacheInput;
}

function startsWith(data: Uint8Array, prefix: string, at = 0): boolean {
  if (data.length < at + prefix.length) return false;
  for (let i = 0; i < prefix.length; i++) if (data[at + i] !== prefix.charCodeAt(i)) return false;
  return true;
}

/** The media type the bytes' signature says (PNG, JPEG, GIF, WebP, PDF); "" when none. */
export function mediaTypeOf(data: Uint8Array): string {
  if (startsWith(data, "\x89PNG\r\n\x1a\n")) return "image/png";
  if (startsWith(data, "\xff\xd8\xff")) return "image/jpeg";
  if (startsWith(data, "GIF87a") || startsWith(data, "GIF89a")) return "image/gif";
  if (startsWith(data, "RIFF") && startsWith(data, "WEBP", 8)) return "image/webp";
  if (startsWith(data, "%PDF-")) return MEDIA_TYPE_PDF;
  return "";
}

/** A CacheInput as a breakpoint; undefined for false. */
export function cacheBreakpoint(cache: CacheInput): CacheBreakpoint | undefined {
  if (isMessage(cache, CacheBreakpointSchema)) return cache;
  if (cache === true) return create(CacheBreakpointSchema, {});
  if (cache === false) return undefined;
  if (cache === "5m") return create(CacheBreakpointSchema, { ttl: CacheTtl.CACHE_TTL_5M });
  if (cache === "1h") return create(CacheBreakpointSchema, { ttl: CacheTtl.CACHE_TTL_1H });
  throw new Error(`sidecar: cache is true, "5m", "1h" or a CacheBreakpoint, not ${JSON.stringify(cache)}`);
}

function withCache(part: Part, cache: CacheInput | undefined): Part {
  const breakpoint = cache === undefined ? undefined : cacheBreakpoint(cache);
  if (breakpoint) part.cache = breakpoint;
  return part;
}

function url(source: string, what: string): string {
  if (!URL_PREFIXES.some((p) => source.startsWith(p))) {
    const given = JSON.stringify(source.slice(0, 60));
    throw new Error(`sidecar: ${what}: a string is a URL (https://, http:// or data:), not ${given}; give a file as { path }`);
  }
  return source;
}

/** A text part; `cache`: the prompt up to and including it is a cache breakpoint. */
export function textPart(text: string, options: { cache?: CacheInput } = {}): Part {
  return withCache(create(PartSchema, { kind: { case: "text", value: text } }), options.cache);
}

function spec<T extends object>(input: Uint8Array | string | T): T | { data: Uint8Array } | { url: string } {
  if (typeof input === "string") return { url: input };
  if (input instanceof Uint8Array) return { data: input };
  return input;
}

/** An image: bytes, a URL, `{ path }`, or an ImageSpec with its media type, detail and cache. */
export function imagePart(input: ImageInput): Part {
  if (isMessage(input, PartSchema)) return input;
  if (isMessage(input, ImagePartSchema)) return create(PartSchema, { kind: { case: "image", value: input } });
  const s = spec<ImageSpec>(input) as ImageSpec;
  const image = create(ImagePartSchema, { mediaType: s.mediaType ?? "" });
  if (s.url !== undefined) {
    image.source = { case: "url", value: url(s.url, "image") };
  } else {
    const data = s.path !== undefined ? readFileSync(s.path) : s.data;
    if (!(data instanceof Uint8Array)) throw new Error("sidecar: an image is bytes, a URL or { path }");
    if (!image.mediaType) {
      let mediaType = mediaTypeOf(data);
      if (!mediaType.startsWith("image/") && s.path !== undefined) mediaType = IMAGE_SUFFIXES[extname(s.path).toLowerCase()] ?? "";
      if (!mediaType.startsWith("image/")) {
        const named = s.path !== undefined ? ` of ${JSON.stringify(s.path)}` : "";
        throw new Error(`sidecar: the image's bytes${named} are no PNG, JPEG, GIF or WebP; give its mediaType`);
      }
      image.mediaType = mediaType;
    }
    image.source = { case: "data", value: new Uint8Array(data) };
  }
  if (s.detail !== undefined) {
    if (!Object.hasOwn(DETAILS, s.detail)) throw new Error(`sidecar: detail is "auto", "low" or "high", not ${JSON.stringify(s.detail)}`);
    image.detail = DETAILS[s.detail];
  }
  return withCache(create(PartSchema, { kind: { case: "image", value: image } }), s.cache);
}

/** A document: PDF bytes, a URL, `{ path }` (a PDF or a .txt/.md file), `{ text, title }`, or a part. */
export function documentPart(input: DocumentInput): Part {
  if (isMessage(input, PartSchema)) return input;
  if (isMessage(input, DocumentPartSchema)) return create(PartSchema, { kind: { case: "document", value: input } });
  const s = spec<DocumentSpec>(input) as DocumentSpec;
  const title = s.title ?? "";
  let doc: DocumentPart;
  if (s.text !== undefined) {
    doc = create(DocumentPartSchema, { source: { case: "text", value: s.text }, mediaType: s.mediaType || MEDIA_TYPE_TEXT, title });
  } else if (s.url !== undefined) {
    doc = create(DocumentPartSchema, { source: { case: "url", value: url(s.url, "document") }, mediaType: s.mediaType ?? "", title });
  } else {
    const data = s.path !== undefined ? readFileSync(s.path) : s.data;
    if (!(data instanceof Uint8Array)) throw new Error("sidecar: a document is bytes, a URL, { path } or { text }");
    const suffix = s.path !== undefined ? extname(s.path).toLowerCase() : "";
    const pdf = mediaTypeOf(data) === MEDIA_TYPE_PDF;
    if (s.mediaType === MEDIA_TYPE_TEXT || (!s.mediaType && !pdf && TEXT_SUFFIXES.includes(suffix))) {
      const text = new TextDecoder("utf-8", { fatal: true }).decode(data);
      doc = create(DocumentPartSchema, { source: { case: "text", value: text }, mediaType: MEDIA_TYPE_TEXT, title });
    } else if (s.mediaType || pdf || suffix === ".pdf") {
      doc = create(DocumentPartSchema, { source: { case: "data", value: new Uint8Array(data) }, mediaType: s.mediaType || MEDIA_TYPE_PDF, title });
    } else {
      const named = s.path !== undefined ? JSON.stringify(s.path) + " is" : "the bytes are";
      throw new Error(`sidecar: ${named} no PDF and no text file (${TEXT_SUFFIXES.join(", ")}); give its mediaType, or { text }`);
    }
  }
  return withCache(create(PartSchema, { kind: { case: "document", value: doc } }), s.cache);
}

function list<T>(value: T | readonly T[] | undefined): readonly T[] {
  if (value === undefined) return [];
  return Array.isArray(value) ? (value as readonly T[]) : [value as T];
}

/**
 * A user turn: `text` alone, or, with images, documents or parts, ordered parts: the documents,
 * the images, the parts given, then the text (media before the question about it, as the
 * providers advise); `cache` makes the last part a cache breakpoint.
 */
export function user(text: string, content: UserContent = {}): Message {
  const parts = [...list(content.document).map(documentPart), ...list(content.image).map(imagePart), ...(content.parts ?? [])];
  const breakpoint = content.cache === undefined ? undefined : cacheBreakpoint(content.cache);
  if (parts.length === 0 && !breakpoint) return create(MessageSchema, { role: Role.USER, text });
  if (text) parts.push(textPart(text));
  if (breakpoint && parts.length > 0) {
    const last = clone(PartSchema, parts[parts.length - 1]);
    last.cache = breakpoint;
    parts[parts.length - 1] = last;
  }
  return create(MessageSchema, { role: Role.USER, parts });
}

/**
 * The model's reply (a CallModelResponse or its message), ready to append to the conversation: its
 * text, tool calls and reasoning exactly as they came (byte-identical: the provider verifies the
 * reasoning's signature).
 */
export function assistant(reply: CallModelResponse | Message): Message {
  const message = isMessage(reply, MessageSchema) ? reply : reply.message;
  return create(MessageSchema, {
    role: Role.ASSISTANT,
    text: message?.text ?? "",
    toolCalls: (message?.toolCalls ?? []).map((c) => clone(ToolCallSchema, c)),
    parts: (message?.parts ?? []).map((p) => clone(PartSchema, p)),
    reasoning: (message?.reasoning ?? []).map((r) => clone(ReasoningPartSchema, r)),
  });
}

/**
 * One tool outcome for the model: an ExecuteTool outcome (its modelText; isError on a failure) or
 * the agent's own tool's text, with images when it has them (the result then carries parts: the
 * text, then the images).
 */
export function toolResult(
  call: ToolCall,
  content: string | ToolOutcome,
  options: { isError?: boolean; image?: ImageInput | readonly ImageInput[] } = {},
): ToolCallResult {
  const text = content instanceof ToolOutcome ? content.modelText : content;
  const failed = content instanceof ToolOutcome ? content.isError : false;
  const result = create(ToolCallResultSchema, { callId: call.id, name: call.name, isError: options.isError ?? failed });
  const images = list(options.image).map(imagePart);
  if (images.length === 0) result.content = text;
  else result.parts = [...(text ? [textPart(text)] : []), ...images];
  return result;
}

/** One ROLE_TOOL message handing every result back: ToolOutcomes (as toolMessage) or toolResult()s. */
export function toolResults(results: readonly (ToolOutcome | ToolCallResult)[]): Message {
  return create(MessageSchema, {
    role: Role.TOOL,
    toolResults: results.map((r) => (r instanceof ToolOutcome ? r.toToolCallResult() : r)),
  });
}

/** A request's `reasoning`: an effort level, or a token budget. */
export function reasoning(amount: Effort | number): Reasoning {
  if (typeof amount === "number") {
    if (!Number.isInteger(amount) || amount < 0) throw new Error(`sidecar: a reasoning budget is a whole number of tokens, not ${amount}`);
    return create(ReasoningSchema, { amount: { case: "budgetTokens", value: amount } });
  }
  if (!Object.hasOwn(EFFORTS, amount)) {
    throw new Error(`sidecar: reasoning is ${Object.keys(EFFORTS).join(", ")} or a token budget, not ${JSON.stringify(amount)}`);
  }
  return create(ReasoningSchema, { amount: { case: "effort", value: EFFORTS[amount] } });
}

/** A request's `toolChoice`: "auto", "none", "required", or the name of the tool the model must call. */
export function toolChoice(choice: string): ToolChoice {
  if (!choice) throw new Error(`sidecar: toolChoice is "auto", "none", "required" or a tool's name, not ""`);
  const modes = new Map([
    ["auto", ToolChoiceMode.AUTO],
    ["none", ToolChoiceMode.NONE],
    ["required", ToolChoiceMode.REQUIRED],
  ]);
  const mode = modes.get(choice);
  return mode !== undefined ? create(ToolChoiceSchema, { mode }) : create(ToolChoiceSchema, { mode: ToolChoiceMode.TOOL, name: choice });
}

/** A request's `providerOptionsJson`: `{"<wire format>": {...}}`, merged into that format's upstream body. */
export function providerOptions(options: Record<string, unknown>): string {
  return JSON.stringify(options);
}
