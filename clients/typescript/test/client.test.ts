import assert from "node:assert/strict";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { create } from "@bufbuild/protobuf";
import * as grpc from "@grpc/grpc-js";
import {
  CallModelResponseSchema,
  ExecuteToolResponseSchema,
  FailureKind,
  Role,
  type CallModelRequest,
  type ExecuteToolRequest,
} from "../src/gen/sidecar/v1/sidecar_pb.js";
import { CORRECTABLE_LINE, SidecarClient, SidecarError, sidecarServiceDefinition, toolDefinitions, toolMessage } from "../src/index.js";
import { failureStatus, quotaFailure, statusError } from "./helpers.js";

type Unary<Req> = grpc.handleUnaryCall<Req, unknown>;

const deadlines: Date[] = [];

const executeTool: Unary<ExecuteToolRequest> = (call, callback) => {
  const req = call.request;
  if (req.tool === "get_doc") {
    const message = "No document with id 'nope' exists.";
    const explanation = `${message}\n${CORRECTABLE_LINE}`;
    callback(
      null,
      create(ExecuteToolResponseSchema, {
        outcome: {
          case: "failure",
          value: {
            kind: FailureKind.RESOURCE_NOT_FOUND,
            correctable: true,
            message,
            explanation,
            http: { statusCode: 404, service: "docs", endpoint: "http://127.0.0.1/docs/nope" },
          },
        },
        modelText: explanation,
        attempts: 1,
        callId: req.callId,
      }),
    );
  } else if (req.tool === "search") {
    callback(
      null,
      create(ExecuteToolResponseSchema, {
        outcome: { case: "result", value: { content: '{"hits":[]}', statusCode: 200, empty: true } },
        modelText: '{"hits":[]}',
        attempts: 1,
        callId: req.callId,
      }),
    );
  } else {
    callback({ code: grpc.status.INVALID_ARGUMENT, details: `unknown tool ${req.tool}` });
  }
};

const callModel: Unary<CallModelRequest> = (call, callback) => {
  switch (call.request.model) {
    case "quota":
      callback(statusError(failureStatus(quotaFailure())));
      return;
    case "deadline":
    {
      const d = call.getDeadline();
      deadlines.push(d instanceof Date ? d : new Date(d));
    }
      break;
    case "slow": {
      const timer = setTimeout(() => callback(null, create(CallModelResponseSchema, {})), 5000);
      call.on("cancelled", () => clearTimeout(timer));
      return;
    }
  }
  callback(null, create(CallModelResponseSchema, { message: { role: Role.ASSISTANT, text: "hello" } }));
};

async function startServer(address: string): Promise<{ server: grpc.Server; port: number }> {
  const server = new grpc.Server();
  server.addService(sidecarServiceDefinition(), {
    ExecuteTool: executeTool,
    CallModel: callModel,
    ListModels: (_call: unknown, callback: grpc.sendUnaryData<unknown>) => callback(null, { models: [{ id: "fast", provider: "openai" }] }),
    ListTools: (_call: unknown, callback: grpc.sendUnaryData<unknown>) => callback(null, { tools: [{ definition: { name: "search" } }] }),
    ClassifyFailure: (_call: unknown, callback: grpc.sendUnaryData<unknown>) => callback(null, { kind: FailureKind.CIRCUIT_OPEN }),
  });
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync(address, grpc.ServerCredentials.createInsecure(), (err, p) => (err ? reject(err) : resolve(p))),
  );
  return { server, port };
}

describe("SidecarClient", () => {
  let server: grpc.Server;
  let client: SidecarClient;
  before(async () => {
    const started = await startServer("127.0.0.1:0");
    server = started.server;
    client = new SidecarClient(`127.0.0.1:${started.port}`);
  });
  after(() => {
    client.close();
    server.forceShutdown();
  });

  it("rejects a CallModel failure with a SidecarError rebuilt from the trailer", async () => {
    const err = await client.callModel({ model: "quota" }).then(
      () => assert.fail("expected a rejection"),
      (e: unknown) => e,
    );
    assert.ok(err instanceof SidecarError);
    assert.equal(err.kind, FailureKind.QUOTA_EXHAUSTED);
    assert.equal(err.grpcCode, grpc.status.RESOURCE_EXHAUSTED);
    assert.equal(err.retryAfterMs, 7000);
    assert.equal(err.http?.statusCode, 429);
    assert.equal(err.explanation, quotaFailure().explanation);
  });

  it("answers a CallModel", async () => {
    const reply = await client.callModel({ model: "fast", messages: [{ role: Role.USER, text: "hi" }] });
    assert.equal(reply.message?.text, "hello");
  });

  it("sends the deadline to the sidecar", async () => {
    const deadline = new Date(Date.now() + 3000);
    await client.callModel({ model: "deadline" }, { deadline });
    const seen = deadlines.pop();
    assert.ok(seen instanceof Date);
    assert.ok(Math.abs(seen.getTime() - deadline.getTime()) < 1000, `server saw ${seen.toISOString()}`);
  });

  it("rejects with DEADLINE_EXCEEDED when the timeout passes", async () => {
    const err = await client.callModel({ model: "slow" }, { timeoutMs: 100 }).catch((e: unknown) => e);
    assert.ok(err instanceof SidecarError);
    assert.equal(err.grpcCode, grpc.status.DEADLINE_EXCEEDED);
    assert.equal(err.kind, FailureKind.JOB_TIMEOUT);
  });

  it("cancels the call when the signal aborts, rejecting with its reason", async () => {
    const controller = new AbortController();
    setTimeout(() => controller.abort(), 100);
    const err = await client.callModel({ model: "slow" }, { signal: controller.signal }).catch((e: unknown) => e);
    assert.ok(err instanceof Error);
    assert.equal(err.name, "AbortError");
  });

  it("rejects at once for an already aborted signal", async () => {
    const reason = new Error("stop");
    await assert.rejects(client.callModel({ model: "fast" }, { signal: AbortSignal.abort(reason) }), reason);
  });

  it("returns a tool failure as an outcome, not a rejection", async () => {
    const outcome = await client.runToolCall({ $typeName: "sidecar.v1.ToolCall", id: "call_1", name: "get_doc", argumentsJson: '{"id":"nope"}' });
    const text = `No document with id 'nope' exists.\n${CORRECTABLE_LINE}`;
    assert.equal(outcome.isError, true);
    assert.equal(outcome.result, undefined);
    assert.equal(outcome.modelText, text);
    assert.equal(outcome.failure?.kind, FailureKind.RESOURCE_NOT_FOUND);
    assert.equal(outcome.failure?.correctable, true);
    assert.equal(outcome.failure?.grpcCode, grpc.status.OK);
    assert.deepEqual(outcome.toOpenAI(), { role: "tool", tool_call_id: "call_1", content: text });
    assert.deepEqual(outcome.toAnthropic(), { type: "tool_result", tool_use_id: "call_1", content: text, is_error: true });
    const result = outcome.toToolCallResult();
    assert.equal(result.callId, "call_1");
    assert.equal(result.isError, true);
    assert.equal(result.name, "get_doc");
  });

  it("gives a tool result no is_error field", async () => {
    const outcome = await client.executeTool({ tool: "search", argumentsJson: '{"q":"x"}', callId: "toolu_9" });
    assert.equal(outcome.isError, false);
    assert.equal(outcome.failure, undefined);
    assert.equal(outcome.result?.empty, true);
    assert.deepEqual(outcome.toAnthropic(), { type: "tool_result", tool_use_id: "toolu_9", content: '{"hits":[]}' });
    assert.equal(JSON.stringify(outcome.toAnthropic()).includes("is_error"), false);
    const msg = toolMessage([outcome]);
    assert.equal(msg.role, Role.TOOL);
    assert.equal(msg.toolResults[0]?.isError, false);
  });

  it("rejects a malformed tool request with INVALID_ARGUMENT", async () => {
    const err = await client.executeTool({ tool: "nope" }).catch((e: unknown) => e);
    assert.ok(err instanceof SidecarError);
    assert.equal(err.grpcCode, grpc.status.INVALID_ARGUMENT);
  });

  it("lists tools and models, and classifies", async () => {
    const tools = await client.listTools();
    assert.deepEqual(toolDefinitions(tools).map((d) => d.name), ["search"]);
    assert.deepEqual((await client.listModels()).map((m) => m.id), ["fast"]);
    assert.equal((await client.classifyFailure({ service: "docs" })).kind, FailureKind.CIRCUIT_OPEN);
  });
});

describe("SidecarClient over a Unix socket", () => {
  it("reaches unix:/path", async () => {
    const path = join(mkdtempSync(join(tmpdir(), "sidecar-")), "s.sock");
    const { server } = await startServer(`unix:${path}`);
    const client = new SidecarClient(`unix:${path}`);
    try {
      assert.deepEqual((await client.listModels()).map((m) => m.id), ["fast"]);
    } finally {
      client.close();
      server.forceShutdown();
    }
  });

  it("reads SIDECAR_ADDR when no address is given", () => {
    const saved = process.env.SIDECAR_ADDR;
    try {
      delete process.env.SIDECAR_ADDR;
      assert.throws(() => new SidecarClient(), /SIDECAR_ADDR/);
      process.env.SIDECAR_ADDR = "127.0.0.1:1";
      const client = new SidecarClient();
      assert.equal(client.address, "127.0.0.1:1");
      client.close();
    } finally {
      if (saved === undefined) delete process.env.SIDECAR_ADDR;
      else process.env.SIDECAR_ADDR = saved;
    }
  });
});
