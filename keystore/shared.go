package keystore

import "context"

// SecretKeeper is a root store that also keeps the installation's shared
// secrets (the subject secret, the attestation and log keys), so that a
// node starts from its flags and its root store's credentials alone, with
// nothing copied by hand. The Vault root store keeps them in KV v2,
// wrapped under a Transit key of their own; the local root file does not
// implement it (its data directory holds them).
type SecretKeeper interface {
	// Secrets returns the kept bundle, or an error wrapping ErrNotFound
	// when none was kept.
	Secrets(ctx context.Context) ([]byte, error)
	// KeepSecrets keeps b when no bundle is kept yet, and returns the
	// bundle kept afterwards: b, or the one another node kept first.
	KeepSecrets(ctx context.Context, b []byte) ([]byte, error)
}

// RecordKeeper is a root store that also keeps records of a durable log
// where a restore of the database cannot roll them back and no node's
// loss takes them (the Vault root store: KV v2; its user is the forget
// ledger, whose lines of a group commit make one record). Records are
// opaque here (their user authenticates them) and named by the caller.
type RecordKeeper interface {
	// KeepRecord durably writes record b under name, before it returns.
	KeepRecord(ctx context.Context, name string, b []byte) error
	// Records lists the names of the kept records.
	Records(ctx context.Context) ([]string, error)
	// ReadRecord reads the record name (an error wrapping ErrNotFound
	// when it is gone).
	ReadRecord(ctx context.Context, name string) ([]byte, error)
	// DropRecord deletes the record name with every version of it.
	DropRecord(ctx context.Context, name string) error
}
