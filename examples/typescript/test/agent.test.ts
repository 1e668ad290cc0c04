import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import * as grpc from "@grpc/grpc-js";
import { CORRECTABLE_LINE, FailureKind, Role, SidecarClient, sidecarServiceDefinition } from "@sidecar-dev/sidecar-client";
import { runAgent } from "../src/agent.js";

const NOT_FOUND = `No document 'doc-404' exists.\n${CORRECTABLE_LINE}`;

type Req = Record<string, any>;
type Handler = (call: { request: Req }, callback: grpc.sendUnaryData<unknown>) => void;

/** Asks for one tool call, then answers with what the tool said. */
const scripted: Record<string, Handler> = {
  ListTools: (_c, cb) => cb(null, { tools: [{ definition: { name: "fetch_doc" } }] }),
  ListModels: (_c, cb) => cb(null, { models: [{ id: "scripted" }] }),
  CallModel: ({ request }, cb) => {
    const last = request.messages.at(-1);
    if (last.role === Role.TOOL) {
      const r = last.toolResults[0];
      cb(null, { message: { role: Role.ASSISTANT, text: `answer after ${r.callId} is_error=${r.isError}: ${r.content}` } });
      return;
    }
    cb(null, {
      message: { role: Role.ASSISTANT, toolCalls: [{ id: "call_7", name: "fetch_doc", argumentsJson: '{"doc_id":"doc-404"}' }] },
    });
  },
  ExecuteTool: ({ request }, cb) =>
    cb(null, {
      outcome: { case: "failure", value: { kind: FailureKind.RESOURCE_NOT_FOUND, correctable: true, explanation: NOT_FOUND } },
      modelText: NOT_FOUND,
      callId: request.callId,
    }),
  ClassifyFailure: (_c, cb) => cb(null, {}),
};

describe("the agent loop", () => {
  let server: grpc.Server;
  let client: SidecarClient;
  before(async () => {
    server = new grpc.Server();
    server.addService(sidecarServiceDefinition(), scripted);
    const port = await new Promise<number>((resolve, reject) =>
      server.bindAsync("127.0.0.1:0", grpc.ServerCredentials.createInsecure(), (e, p) => (e ? reject(e) : resolve(p))),
    );
    client = new SidecarClient(`127.0.0.1:${port}`);
  });
  after(() => {
    client.close();
    server.forceShutdown();
  });

  it("hands a tool's failure back to the model as model_text", async () => {
    const trace: string[] = [];
    const answer = await runAgent(client, "read doc-404", { trace: (l) => trace.push(l) });
    assert.equal(answer, `answer after call_7 is_error=true: ${NOT_FOUND}`);
    assert.deepEqual(trace, ["turn 1: fetch_doc -> failure RESOURCE_NOT_FOUND"]);
  });
});

describe("the agent loop against a real sidecar", { skip: process.env.SIDECAR_ADDR ? false : "SIDECAR_ADDR is not set" }, () => {
  it("answers after running a tool", async () => {
    const client = new SidecarClient(process.env.SIDECAR_ADDR);
    try {
      const trace: string[] = [];
      const answer = await runAgent(client, "Find what the documentation says about retries.", {
        model: process.env.SIDECAR_MODEL,
        trace: (l) => trace.push(l),
        maxTurns: 6,
      });
      assert.ok(answer.length > 0);
      assert.match(trace[0] ?? "", /^turn 1: /);
    } finally {
      client.close();
    }
  });
});
