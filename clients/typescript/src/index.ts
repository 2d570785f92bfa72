export {
  Client,
  type ClientOptions,
  type CounterNames,
  type DecodedId,
  type DecodedValue,
  type DecodeOptions,
  type Health,
  type IntLike,
  type NumberParts,
  type Numbering,
  type NumberValue,
  type Period,
  type PoolInfo,
  type PoolRow,
  type PoolServerView,
  type SequenceInfo,
  type SequenceServerView,
  type ShardId,
  type ShardKeyParts,
  type ShardKeyView,
  type Ticket,
} from "./client.js";
export {
  ConflictError,
  ForbiddenError,
  GoneError,
  KeysmithError,
  NotFoundError,
  RateLimitedError,
  SetupError,
  UnauthorizedError,
  UnavailableError,
} from "./errors.js";
export type { TransportStats } from "./transport.js";
export { type Json, parse as parseJson, stringify as stringifyJson } from "./json.js";
export { type Lease, type Range, Sequence, type SequenceOptions, type ValueRange } from "./sequence.js";
export { ID_EPOCH_MS, ProcessWorkerLease, WorkerLease, type WorkerInfo, type WorkerLeaseInfo, type WorkerLeaseOptions } from "./workers.js";
