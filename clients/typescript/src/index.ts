/**
 * @shredd/client: the TypeScript client of shredd (docs/clients.md).
 * ESM, no dependency beyond the platform's fetch and Web Crypto.
 */
export * from "./errors.js";
export * from "./types.js";
export {
  Client, Decrypted, Unit, Kinds, Sealing, Leases, Artifacts, Forgets, Holders, Log, MAX_BATCH, DEFAULT_URL,
  type ClientOptions, type Source, type EncryptRequest, type DecryptRequest, type DecryptRawOptions, type RawDecrypted,
  type RegisterRequest, type WaitOptions,
} from "./client.js";
export { HolderKit, type PurgeCallback, type PurgeOutcome, type ProbeFunc, type ProbeOutcome } from "./holder.js";
export * as envelope from "./envelope.js";
export * as verify from "./verify.js";
export { type Response, type RequestOptions } from "./http.js";
export { verifyExport, type ExportReport, type ExportCheck, type VerifyExportOptions } from "./evidence.js";
