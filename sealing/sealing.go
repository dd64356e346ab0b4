// Package sealing is shredd's sealing side: it seals and opens data under
// the keys of every subject of its lineage, issues data keys for
// client-side sealing, registers plaintext-held artifacts, registers again
// the artifacts of envelopes a restored database lost, and does each of
// them for a batch at once. It implements shredd.Sealer.
//
// It owns no table: it resolves each source's lineage (its subjects' and
// its parents' subjects), fetches the subject keys from the key tree, and
// records the artifact, its lineage and the decrypt leases in package
// registry, under the registry's barrier read locks. It may import the root
// package, envelope, keystore and registry; never erasure, and it names
// none of the registry's tables in SQL.
//
// Sealing needs every subject key of the lineage (envelope's AND
// semantics), so forgetting any one subject makes every derivative and
// aggregate of it unreadable. A registration holds the read side of its
// subjects' barrier locks while the registry checks them live and commits,
// so nothing registered after a forget's commit carries the subject.
package sealing
