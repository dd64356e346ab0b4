/** Answers of the API (docs/api.md): its JSON objects, typed, with binary fields decoded. */

export const STATES = ["requested", "committed", "shredded", "erased", "blocked", "overdue"] as const;
/** State is a forget's state. */
export type State = (typeof STATES)[number];

export interface Health { readonly status: string; readonly root_store: string; readonly root_version: number }
export interface Kind { readonly name: string; readonly description?: string; readonly created_at?: string }
export interface Encrypted {
  readonly artifact: string; readonly ciphertext: string; readonly lineage_size: number;
  /** inherited: the undeclared reads whose lineage a `--reads inherit` token's write took (omitted when none). */
  readonly inherited?: readonly string[];
}
export interface Lease {
  readonly id: string; readonly artifact: string; readonly holder?: string;
  /** unit: the unit of work the decrypt named. */
  readonly unit?: string;
  readonly issued_at: string; readonly expires_at: string; readonly released_at?: string;
}
export interface Sealed {
  readonly artifact: string; readonly lineage_size: number;
  /** envelope is the binary envelope (what decryptRaw opens). */
  readonly envelope: Uint8Array;
  /** ciphertext is its shredd:v1: text form (what decrypt opens). */
  readonly ciphertext: string;
  readonly inherited?: readonly string[];
}
export interface RawEncrypted {
  readonly envelope: Uint8Array; readonly artifact: string; readonly lineage_size: number;
  readonly inherited?: readonly string[];
}
/** Read is one read a write answered for, and how: "named", "inherited" or "independent". */
export interface Read { readonly lease: string; readonly artifact?: string; readonly how: string }
export interface Artifact {
  readonly artifact: string; readonly kind: string; readonly holder?: string; readonly sealed: boolean;
  readonly parents?: readonly string[]; readonly lineage_size: number; readonly created_at?: string;
  /** reads: the reads the artifact's write answered for (omitted when none). */
  readonly reads?: readonly Read[];
}
export interface Condition { readonly name: string; readonly status: string; readonly reason?: string }
export interface Forget {
  readonly forget: string; readonly state: State; readonly overdue?: boolean; readonly barrier?: number;
  readonly t_prop_seconds?: number; readonly deadline?: string; readonly requested_at?: string;
  readonly committed_at?: string; readonly rekeyed_at?: string; readonly shredded_at?: string;
  readonly erased_at?: string;
  /** commitment_salt is only in the answer of the call that created the forget: keep it. */
  readonly commitment_salt?: string;
  readonly epoch?: number; readonly conditions?: readonly Condition[]; readonly verification?: readonly Condition[];
}
export interface ForgetPage { readonly forgets: readonly Forget[]; readonly next?: string; readonly counts?: Readonly<Record<string, number>> }
export interface PreviewCounts {
  readonly total: number; readonly direct: number; readonly derived: number;
  readonly collateral: number; readonly plaintext_held: number;
}
export interface PreviewArtifact {
  readonly artifact: string; readonly kind: string; readonly holder?: string; readonly sealed: boolean;
  readonly hops: number; readonly collateral: boolean; readonly other_subjects: number;
}
export interface Preview {
  readonly already_forgotten: boolean; readonly counts: PreviewCounts; readonly truncated: boolean;
  readonly artifacts?: readonly PreviewArtifact[];
}
export interface Epoch {
  readonly epoch: number; readonly root_version: number; readonly retired_versions?: readonly number[];
  readonly started_at?: string; readonly finished_at?: string;
}
/** Reinstatement is a forgotten subject's new key generation (Forgets.reinstate); it names no subject. */
export interface Reinstatement {
  readonly generation: number;
  /** the generation the forget destroyed (0: the subject never had a key) */
  readonly previous_generation: number;
  /** the forget it follows, unchanged */
  readonly forget: string;
  /** its subject_reinstated log entry; -1 without a log */
  readonly log_index: number;
  readonly reinstated_at: string;
}
export interface Holder { readonly holder: string; readonly public_key: string; readonly created_at?: string }
export interface PurgeWork { readonly forget: string; readonly artifacts: readonly string[] }
/** ProbeWork is a probe a holder must answer now (docs/attestation.md §6a): does its retrieval path still return any of these? */
export interface ProbeWork {
  readonly probe: string;
  readonly forget: string;
  readonly nonce: string;
  readonly artifacts: readonly string[];
  readonly markers: readonly string[];
  /** RFC 3339: the answer must arrive before it. */
  readonly deadline: string;
}
/** ProbeResult is shredd's reading of a probe answer: clean when the path returned nothing asked. */
export interface ProbeResult { readonly probe: string; readonly clean: boolean }
export interface AckResult { readonly closed: readonly string[]; readonly missing: readonly string[] }
export interface InventoryItem { readonly id: string; readonly kind: string }
export interface InventoryReport {
  readonly items: number; readonly unknown_artifacts: readonly string[]; readonly unknown_kinds: readonly string[];
  readonly contradicted_acks: readonly string[];
}
export interface HolderStatus {
  readonly holder: string; readonly created_at?: string; readonly pending_artifacts: number;
  readonly pending_forgets: number; readonly last_ack_at?: string;
  readonly inventory?: { readonly reported_at?: string; readonly items: number; readonly unknown_artifacts: number; readonly unknown_kinds: number; readonly clean: boolean };
}
export interface HolderPage { readonly holders: readonly HolderStatus[]; readonly next?: string }

/** Result is one item of a batch: its value, or the error that item alone answered. */
export type Result<T> = { readonly ok: true; readonly value: T } | { readonly ok: false; readonly error: import("./errors.js").APIError };
