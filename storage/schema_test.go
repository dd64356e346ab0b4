package storage_test

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/shredd/shredd/storage"
	"github.com/shredd/shredd/storage/storagetest"
)

// TestNormalizeSQL: statements that differ only in whitespace, comments or
// IF NOT EXISTS normalise alike; any other difference, in quoted text
// too, stays.
func TestNormalizeSQL(t *testing.T) {
	same := [][2]string{
		{"CREATE TABLE IF NOT EXISTS b (\n\tid INTEGER PRIMARY KEY,\n\tw BLOB NOT NULL,\n\tn BLOB);", "CREATE TABLE b (id INTEGER PRIMARY KEY, w BLOB NOT NULL, n BLOB)"},
		{"CREATE TABLE b ( -- the key\n id INTEGER /* pk */ PRIMARY KEY )", "CREATE TABLE b(id INTEGER PRIMARY KEY)"},
	}
	for _, c := range same {
		if a, b := storage.NormalizeSQL(c[0]), storage.NormalizeSQL(c[1]); a != b {
			t.Errorf("%q and %q normalise to %q and %q", c[0], c[1], a, b)
		}
	}
	differ := [][2]string{
		{"CREATE TABLE b (s TEXT DEFAULT 'a  b')", "CREATE TABLE b (s TEXT DEFAULT 'a b')"},
		{"CREATE TABLE b (s TEXT DEFAULT '--x')", "CREATE TABLE b (s TEXT DEFAULT '')"},
		{"CREATE TABLE b (id INTEGER)", "CREATE TABLE b (id INTEGER CHECK (id > 0))"},
		{"CREATE TABLE b (a INT, bc INT)", "CREATE TABLE b (ab INT, c INT)"},
	}
	for _, c := range differ {
		if a, b := storage.NormalizeSQL(c[0]), storage.NormalizeSQL(c[1]); a == b {
			t.Errorf("%q and %q both normalise to %q", c[0], c[1], a)
		}
	}
}

// TestCompareSchema names each extra, missing and changed object.
func TestCompareSchema(t *testing.T) {
	want := []storage.SchemaObject{{"table", "subjects", "subjects", "x"}, {"index", "i", "subjects", "y"}}
	if err := storage.CompareSchema(want, want); err != nil {
		t.Fatal(err)
	}
	have := []storage.SchemaObject{{"table", "subjects", "subjects", "x2"}, {"trigger", "keep_keys", "subjects", "z"}}
	err := storage.CompareSchema(have, want)
	if !errors.Is(err, storage.ErrSchemaAltered) {
		t.Fatalf("%v, want ErrSchemaAltered", err)
	}
	for _, w := range []string{"changed table subjects", "extra trigger keep_keys on subjects", "missing index i on subjects"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("%v does not say %q", err, w)
		}
	}
}

// TestBackendsTables: both backends' migrations create the same tables
// and views (storagetest.Tables), so that the conformance suite checks
// the same list on each.
func TestBackendsTables(t *testing.T) {
	var lists [2][]string
	for i, b := range []string{"sqlite", "postgres"} {
		names, err := storagetest.Tables(os.DirFS(filepath.Join(b, "migrations")))
		if err != nil {
			t.Fatalf("%s: %v", b, err)
		}
		lists[i] = names
	}
	if a, b := strings.Join(lists[0], " "), strings.Join(lists[1], " "); a != b {
		t.Fatalf("the backends' migrations create different tables and views:\n\tsqlite:   %s\n\tpostgres: %s", a, b)
	}
	// The tables every package of shredd reads or writes are among them.
	for _, want := range []string{"subjects", "forgets", "lineage_all", "secrets", "readiness"} {
		if !slices.Contains(lists[0], want) {
			t.Errorf("the migrations do not create %s (parsed %s)", want, strings.Join(lists[0], " "))
		}
	}
	t.Logf("%d tables and views: %s", len(lists[0]), strings.Join(lists[0], " "))
}
