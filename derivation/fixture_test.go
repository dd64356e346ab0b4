package derivation_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"database/sql"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/note"

	"github.com/shredd/shredd/derivation"
	"github.com/shredd/shredd/journal"
	"github.com/shredd/shredd/keystore"
	"github.com/shredd/shredd/keystore/local"
	"github.com/shredd/shredd/storage/sqlite"
	"github.com/shredd/shredd/translog"
)

// fixture says how to build a service on real files (a local root file
// and a SQLite database in a temporary directory).
type fixture struct {
	secret  byte   // fills the subject secret
	clock   *clock // nil: the real clock and the package defaults
	journal bool   // a transparency log, as cmd/shredd wires it
	kinds   []string
	ledger  *derivation.Ledger // the forget ledger, when set
}

// built is what build returns.
type built struct {
	db   *sql.DB
	svc  *derivation.Service
	keys *keystore.Store
	log  *translog.Log // with journal
	vkey string
	key  ed25519.PrivateKey
}

func build(t testing.TB, f fixture) built {
	t.Helper()
	dir := t.TempDir()
	root, err := local.Open(filepath.Join(dir, "root.key"))
	if err != nil {
		t.Fatal(err)
	}
	db, err := sqlite.Open(filepath.Join(dir, "shredd.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	ctx := context.Background()
	b := built{db: db}
	kopts := keystore.Options{Buckets: 16}
	var dopts derivation.Options
	if f.clock != nil {
		kopts.CacheTTL, kopts.Now = 30*time.Second, f.clock.now
		dopts = derivation.Options{Now: f.clock.now, LeaseTTL: 5 * time.Minute, Deadline: time.Hour}
	}
	if f.journal {
		skey, vkey, err := translog.GenerateKey("shredd/test-log")
		if err != nil {
			t.Fatal(err)
		}
		signer, err := note.NewSigner(skey)
		if err != nil {
			t.Fatal(err)
		}
		if b.log, err = translog.Open(ctx, db, signer); err != nil {
			t.Fatal(err)
		}
		_, b.key, _ = ed25519.GenerateKey(nil)
		b.vkey = vkey
		var now func() time.Time
		if f.clock != nil {
			now = f.clock.now
		}
		j, err := journal.New(b.log, vkey, b.key, now)
		if err != nil {
			t.Fatal(err)
		}
		kopts.Journal, dopts.Journal = j, j
	}
	if b.keys, err = keystore.Open(ctx, db, root, kopts); err != nil {
		t.Fatal(err)
	}
	h, err := derivation.NewHasher(bytes.Repeat([]byte{f.secret}, 32))
	if err != nil {
		t.Fatal(err)
	}
	dopts.Ledger = f.ledger
	if b.svc, err = derivation.New(ctx, db, b.keys, h, dopts); err != nil {
		t.Fatal(err)
	}
	for _, k := range f.kinds {
		if _, _, err := b.svc.PutKind(ctx, k, ""); err != nil {
			t.Fatal(err)
		}
	}
	return b
}
