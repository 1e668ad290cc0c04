/**
 * The google.rpc messages of the failure wire format, read and written on the
 * wire directly: google.rpc.Status (the `grpc-status-details-bin` trailer),
 * ErrorInfo and RetryInfo. Three tiny messages do not justify shipping the
 * googleapis protos; their field numbers are fixed by google/rpc/*.proto.
 */
import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import { BinaryReader, BinaryWriter, WireType } from "@bufbuild/protobuf/wire";
import { AnySchema, DurationSchema, type Any, type Duration } from "@bufbuild/protobuf/wkt";

/** The trailer that carries a google.rpc.Status. */
export const STATUS_DETAILS_KEY = "grpc-status-details-bin";

export const ERROR_INFO_TYPE = "google.rpc.ErrorInfo";
export const RETRY_INFO_TYPE = "google.rpc.RetryInfo";

/** google.rpc.Status. */
export interface RpcStatus {
  code: number;
  message: string;
  details: Any[];
}

/** google.rpc.ErrorInfo. */
export interface ErrorInfo {
  reason: string;
  domain: string;
  metadata: Record<string, string>;
}

/** google.rpc.RetryInfo. */
export interface RetryInfo {
  retryDelay?: Duration;
}

export function decodeStatus(bytes: Uint8Array): RpcStatus {
  const out: RpcStatus = { code: 0, message: "", details: [] };
  const r = new BinaryReader(bytes);
  while (r.pos < r.len) {
    const [no, wt] = r.tag();
    if (no === 1 && wt === WireType.Varint) out.code = r.int32();
    else if (no === 2 && wt === WireType.LengthDelimited) out.message = r.string();
    else if (no === 3 && wt === WireType.LengthDelimited) out.details.push(fromBinary(AnySchema, r.bytes()));
    else r.skip(wt, no);
  }
  return out;
}

export function encodeStatus(status: RpcStatus): Uint8Array {
  const w = new BinaryWriter();
  if (status.code !== 0) w.tag(1, WireType.Varint).int32(status.code);
  if (status.message !== "") w.tag(2, WireType.LengthDelimited).string(status.message);
  for (const any of status.details) w.tag(3, WireType.LengthDelimited).bytes(toBinary(AnySchema, any));
  return w.finish();
}

export function decodeErrorInfo(bytes: Uint8Array): ErrorInfo {
  const out: ErrorInfo = { reason: "", domain: "", metadata: {} };
  const r = new BinaryReader(bytes);
  while (r.pos < r.len) {
    const [no, wt] = r.tag();
    if (no === 1 && wt === WireType.LengthDelimited) out.reason = r.string();
    else if (no === 2 && wt === WireType.LengthDelimited) out.domain = r.string();
    else if (no === 3 && wt === WireType.LengthDelimited) {
      const entry = new BinaryReader(r.bytes());
      let key = "";
      let value = "";
      while (entry.pos < entry.len) {
        const [eno, ewt] = entry.tag();
        if (eno === 1 && ewt === WireType.LengthDelimited) key = entry.string();
        else if (eno === 2 && ewt === WireType.LengthDelimited) value = entry.string();
        else entry.skip(ewt, eno);
      }
      out.metadata[key] = value;
    } else r.skip(wt, no);
  }
  return out;
}

export function encodeErrorInfo(info: ErrorInfo): Uint8Array {
  const w = new BinaryWriter();
  if (info.reason !== "") w.tag(1, WireType.LengthDelimited).string(info.reason);
  if (info.domain !== "") w.tag(2, WireType.LengthDelimited).string(info.domain);
  for (const [key, value] of Object.entries(info.metadata)) {
    w.tag(3, WireType.LengthDelimited).fork();
    w.tag(1, WireType.LengthDelimited).string(key);
    w.tag(2, WireType.LengthDelimited).string(value);
    w.join();
  }
  return w.finish();
}

export function decodeRetryInfo(bytes: Uint8Array): RetryInfo {
  const out: RetryInfo = {};
  const r = new BinaryReader(bytes);
  while (r.pos < r.len) {
    const [no, wt] = r.tag();
    if (no === 1 && wt === WireType.LengthDelimited) out.retryDelay = fromBinary(DurationSchema, r.bytes());
    else r.skip(wt, no);
  }
  return out;
}

export function encodeRetryInfo(info: RetryInfo): Uint8Array {
  const w = new BinaryWriter();
  if (info.retryDelay) w.tag(1, WireType.LengthDelimited).bytes(toBinary(DurationSchema, info.retryDelay));
  return w.finish();
}

/** The full type name an Any names (its type URL without the host part). */
export function anyTypeName(any: Any): string {
  return any.typeUrl.slice(any.typeUrl.lastIndexOf("/") + 1);
}

/** Packs raw message bytes of typeName into an Any. */
export function packBytes(typeName: string, value: Uint8Array): Any {
  return create(AnySchema, { typeUrl: `type.googleapis.com/${typeName}`, value });
}

/** A Duration in milliseconds. */
export function durationMs(d: Duration): number {
  return Number(d.seconds) * 1000 + d.nanos / 1e6;
}
