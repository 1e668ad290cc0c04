import assert from "node:assert/strict";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, it } from "node:test";
import { create, equals, toBinary } from "@bufbuild/protobuf";
import {
  CacheTtl,
  CallModelResponseSchema,
  DocumentPartSchema,
  ExecuteToolResponseSchema,
  FailureKind,
  ImageDetail,
  MessageSchema,
  ReasoningEffort,
  Role,
  ToolCallSchema,
  ToolChoiceMode,
  type Part,
} from "../src/gen/sidecar/v1/sidecar_pb.js";
import {
  ToolOutcome,
  assistant,
  documentPart,
  imagePart,
  mediaTypeOf,
  providerOptions,
  reasoning,
  textPart,
  toolChoice,
  toolResult,
  toolResults,
  user,
} from "../src/index.js";

const PNG = Uint8Array.from(Buffer.from("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", "latin1"));
const PDF = Uint8Array.from(Buffer.from("%PDF-1.4\n%%EOF\n", "latin1"));

function file(name: string, data: Uint8Array | string): string {
  const path = join(mkdtempSync(join(tmpdir(), "content-")), name);
  writeFileSync(path, data);
  return path;
}

const kinds = (parts: Part[]) => parts.map((p) => p.kind.case);

describe("content", () => {
  it("keeps a text turn plain text", () => {
    assert.ok(equals(MessageSchema, user("hi"), create(MessageSchema, { role: Role.USER, text: "hi" })));
    assert.ok(equals(MessageSchema, user("hi", { cache: false }), user("hi")));
  });

  it("puts an image file before the question", () => {
    const message = user("what is this?", { image: { path: file("shot.png", PNG) } });
    assert.equal(message.text, "");
    assert.deepEqual(kinds(message.parts), ["image", "text"]);
    const image = message.parts[0].kind;
    assert.ok(image.case === "image");
    assert.equal(image.value.mediaType, "image/png");
    assert.deepEqual(image.value.source, { case: "data", value: PNG });
  });

  it("reads media types from the bytes, then the suffix, and refuses what neither tells", () => {
    assert.equal(mediaTypeOf(Buffer.from("\xff\xd8\xff\xe0", "latin1")), "image/jpeg");
    assert.equal(mediaTypeOf(Buffer.from("GIF87a..")), "image/gif");
    assert.equal(mediaTypeOf(Buffer.from("RIFF\0\0\0\0WEBPVP8 ", "latin1")), "image/webp");
    assert.equal(mediaTypeOf(PDF), "application/pdf");
    assert.equal(mediaTypeOf(Buffer.from("plain")), "");
    const odd = imagePart({ path: file("odd.webp", "\0\x01") });
    assert.ok(odd.kind.case === "image" && odd.kind.value.mediaType === "image/webp");
    assert.throws(() => user("what?", { image: Buffer.from("not an image") }), /no PNG, JPEG, GIF or WebP; give its mediaType/);
    assert.throws(() => user("what?", { image: "shot.png" }), /a string is a URL/);
    const typed = imagePart({ data: Buffer.from("raw"), mediaType: "image/png", detail: "low", cache: "5m" });
    assert.ok(typed.kind.case === "image" && typed.kind.value.detail === ImageDetail.LOW);
    assert.equal(typed.cache?.ttl, CacheTtl.CACHE_TTL_5M);
  });

  it("builds documents from PDFs, URLs and text, before the images, and caches the last part", () => {
    const message = user("look", {
      image: [PNG, "https://example.com/a.png"],
      document: [
        { path: file("report.pdf", PDF) },
        PDF,
        "https://example.com/r.pdf",
        { path: file("notes.md", "# notes") },
        { text: "a b", title: "ab" },
      ],
      parts: [textPart("context", { cache: true })],
      cache: "1h",
    });
    assert.deepEqual(kinds(message.parts), ["document", "document", "document", "document", "document", "image", "image", "text", "text"]);
    const docs = message.parts.slice(0, 5).map((p) => (p.kind.case === "document" ? p.kind.value : undefined));
    const want = [
      create(DocumentPartSchema, { source: { case: "data", value: PDF }, mediaType: "application/pdf" }),
      create(DocumentPartSchema, { source: { case: "data", value: PDF }, mediaType: "application/pdf" }),
      create(DocumentPartSchema, { source: { case: "url", value: "https://example.com/r.pdf" } }),
      create(DocumentPartSchema, { source: { case: "text", value: "# notes" }, mediaType: "text/plain" }),
      create(DocumentPartSchema, { source: { case: "text", value: "a b" }, mediaType: "text/plain", title: "ab" }),
    ];
    docs.forEach((d, i) => assert.ok(d && equals(DocumentPartSchema, d, want[i]), `docs[${i}]`));
    const none = Array(7).fill(undefined);
    assert.deepEqual(
      message.parts.map((p) => p.cache?.ttl),
      [...none, CacheTtl.CACHE_TTL_UNSPECIFIED, CacheTtl.CACHE_TTL_1H],
    );
    assert.throws(() => documentPart(Buffer.from("plain bytes")), /no PDF/);
  });

  it("passes a reply back with its reasoning byte-identical", () => {
    const reply = create(CallModelResponseSchema, {
      message: {
        role: Role.ASSISTANT,
        text: "checking",
        toolCalls: [{ id: "toolu_1", name: "get_weather", argumentsJson: '{"city": "Paris"}' }],
        reasoning: [
          { text: "Let me think…\n", signature: "EqQBCgIYAhIM+/=", format: "anthropic" },
          { redactedData: "EmwKAhgBEgy3va3pzix/LafPsn4a", format: "anthropic" },
        ],
      },
    });
    for (const given of [reply, reply.message!]) {
      const turn = assistant(given);
      assert.deepEqual(toBinary(MessageSchema, turn), toBinary(MessageSchema, reply.message!));
      turn.reasoning[0].signature = "changed";
      assert.equal(reply.message!.reasoning[0].signature, "EqQBCgIYAhIM+/=");
    }
  });

  it("carries a tool's images after its text", () => {
    const call = create(ToolCallSchema, { id: "call_1", name: "screenshot" });
    const shot = toolResult(call, "the page", { image: PNG });
    assert.equal(shot.content, "");
    assert.deepEqual(kinds(shot.parts), ["text", "image"]);
    const failed = new ToolOutcome(
      create(ExecuteToolResponseSchema, { modelText: "boom", outcome: { case: "failure", value: { kind: FailureKind.EXTERNAL_SERVICE } } }),
      "call_2",
      "fetch",
    );
    const plain = toolResult(call, failed);
    assert.deepEqual([plain.content, plain.isError, plain.parts.length], ["boom", true, 0]);
    const message = toolResults([shot, failed]);
    assert.equal(message.role, Role.TOOL);
    assert.deepEqual(message.toolResults.map((r) => [r.callId, r.isError]), [["call_1", false], ["call_2", true]]);
  });

  it("fills the request's controls", () => {
    assert.deepEqual(reasoning("high").amount, { case: "effort", value: ReasoningEffort.HIGH });
    assert.deepEqual(reasoning(2048).amount, { case: "budgetTokens", value: 2048 });
    assert.throws(() => reasoning("hard" as "high"), /reasoning is minimal, low, medium, high/);
    assert.throws(() => reasoning("toString" as "high"), /reasoning is/);
    assert.deepEqual(
      ["auto", "none", "required"].map((c) => toolChoice(c).mode),
      [ToolChoiceMode.AUTO, ToolChoiceMode.NONE, ToolChoiceMode.REQUIRED],
    );
    assert.deepEqual([toolChoice("get_weather").mode, toolChoice("get_weather").name], [ToolChoiceMode.TOOL, "get_weather"]);
    assert.deepEqual([toolChoice("constructor").mode, toolChoice("constructor").name], [ToolChoiceMode.TOOL, "constructor"]);
    assert.throws(() => toolChoice(""), /toolChoice is/);
    assert.equal(providerOptions({ anthropic: { metadata: { user_id: "u" } } }), '{"anthropic":{"metadata":{"user_id":"u"}}}');
  });
});
