package keystore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/shredd/shredd"
	"github.com/shredd/shredd/storage"
)

// Errors of the start-up check that ties a database to its root store.
var (
	// ErrStaleDatabase means the database's bucket keys are wrapped under
	// root versions the root store has destroyed: the database is a backup
	// older than the root's last epoch, and no key in it can be opened.
	ErrStaleDatabase = errors.New("database older than the root store's last epoch")
	// ErrRootBehind means the database's bucket keys are wrapped under root
	// versions the root store never made: the root store (a root file
	// restored from a copy) is older than the database.
	ErrRootBehind = errors.New("root store older than the database")
	// ErrRootMismatch means the root store's versions agree with the
	// database but it does not open the database's bucket keys: another
	// root than the one the data was written with.
	ErrRootMismatch = errors.New("root store is not the database's")
)

// CheckRoot checks that the root store can open the key tree: every bucket
// key must be wrapped under a version between the root's oldest available
// and its latest. It returns an error wrapping ErrStaleDatabase or
// ErrRootBehind, with what to do, when not; ErrRootUnavailable when the root
// store does not answer.
func (t *Tree) CheckRoot(ctx context.Context) error { return CheckRoot(ctx, t.db, t.Root()) }

// CheckRoot is Tree.CheckRoot before a tree is opened on db: it reads
// the database and asks root, and changes nothing, so that a start can
// refuse before it writes a byte. A database without a buckets table yet
// (new) passes.
func CheckRoot(ctx context.Context, db *storage.DB, root RootStore) error {
	var lo, hi sql.NullInt64
	if err := db.QueryRowContext(ctx, `SELECT min(root_version), max(root_version) FROM buckets`).Scan(&lo, &hi); err != nil {
		return fmt.Errorf("keystore: check root: %w", err)
	}
	if !lo.Valid {
		return nil
	}
	v, err := root.Versions(ctx)
	if err != nil {
		return fmt.Errorf("keystore: check root: %w", err)
	}
	switch {
	case int(lo.Int64) < v.MinAvailable:
		advice := "Restore a backup taken after the last epoch (shredd backup list --dir BACKUP_DIR shows each backup's root version; --backup-dir keeps one after every epoch)"
		if db.Shared() {
			// PostgreSQL: shredd takes no backups there (docs/scale-out.md).
			advice = "Restore a dump (pg_dump, or a base backup and its WAL) taken after the last epoch: " +
				"the root version a dump needs is the largest root_version of its buckets table, and it must be at least the root store's oldest version"
		}
		return fmt.Errorf("keystore: the database's bucket keys are wrapped under root version %d, which the %s root store destroyed in an epoch (its oldest version is %d): %w; "+
			"this database is a backup taken before that epoch and opens no key. %s",
			lo.Int64, root.Kind(), v.MinAvailable, ErrStaleDatabase, advice)
	case int(hi.Int64) > v.Latest:
		return fmt.Errorf("keystore: the database's bucket keys are wrapped under root version %d, but the %s root store's latest version is %d: %w; "+
			"the root store was restored from an older copy. %s",
			hi.Int64, root.Kind(), v.Latest, ErrRootBehind, putBackRoot(root))
	}
	// The version numbers agree; a root with the same numbers that is not
	// this data's (a fresh Vault, another instance's root file) opens
	// nothing. One bucket key is opened to tell.
	var blob []byte
	if err := db.QueryRowContext(ctx, `SELECT wrapped FROM buckets ORDER BY root_version DESC LIMIT 1`).Scan(&blob); err != nil {
		return fmt.Errorf("keystore: check root: %w", err)
	}
	keys, err := root.Unwrap(ctx, [][]byte{blob})
	switch {
	case errors.Is(err, ErrCorrupt):
		return fmt.Errorf("keystore: the %s root store does not open the database's bucket keys (their authentication fails): %w; "+
			"it is another root than the one this data was written with (a new Vault or key of the same name, another instance's root file). %s",
			root.Kind(), ErrRootMismatch, putBackRoot(root))
	case err != nil:
		return fmt.Errorf("keystore: check root: %w", err)
	}
	for _, k := range keys {
		clear(k)
	}
	return nil
}

// putBackRoot is the fix of a root that does not go with the database.
func putBackRoot(root RootStore) string {
	if root.Kind() == "local" {
		return "Put back the root.key that goes with this database (never one from a backup)"
	}
	return "Point shredd at the Vault, Transit mount and key that go with this database (--vault-addr, --vault-transit-mount, --vault-key)"
}

// BucketRootVersion returns the newest root version the bucket keys are
// wrapped under (0 before the tree has buckets): what a backup of the
// database taken now would need of the root store.
func (t *Tree) BucketRootVersion(ctx context.Context) (int, error) {
	var v sql.NullInt64
	if err := t.db.QueryRowContext(ctx, `SELECT max(root_version) FROM buckets`).Scan(&v); err != nil {
		return 0, fmt.Errorf("keystore: root version: %w", err)
	}
	return int(v.Int64), nil
}

// CheckBuckets compares, changing nothing, the number of bucket keys of
// the database's key tree with want (0: any): it is fixed when the tree
// is made, and a start that asks for another is refused before it writes.
func CheckBuckets(ctx context.Context, db *storage.DB, want int) error {
	var n int64
	err := db.QueryRowContext(ctx, `SELECT v FROM keystore_meta WHERE k='buckets'`).Scan(&n)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return nil
	case err != nil:
		return fmt.Errorf("keystore: check buckets: %w", err)
	case want != 0 && int64(want) != n:
		return errBuckets(n, want)
	}
	return nil
}

// errBuckets refuses a number of buckets other than the tree's (n).
func errBuckets(n int64, want int) error {
	return fmt.Errorf("keystore: the key tree has %d buckets, --buckets says %d: %w; the number is fixed when the data is made: start with --buckets %d; nothing was changed", n, want, shredd.ErrInvalid, n)
}
