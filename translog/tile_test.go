package translog_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"testing"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/shredd/shredd/translog"
)

// tileReader is x/mod's client-side tlog.TileReader over Log.ReadTile,
// mapping x/mod tiles to C2SP tlog-tiles paths.
type tileReader struct {
	l     *translog.Log
	paths map[string]bool // every path read
}

func (r *tileReader) Height() int { return translog.TileHeight }

func (r *tileReader) ReadTiles(tiles []tlog.Tile) ([][]byte, error) {
	var data [][]byte
	for _, t := range tiles {
		p := translog.TilePath(t)
		b, err := r.l.ReadTile(context.Background(), p)
		if err != nil {
			return nil, err
		}
		r.paths[p] = true
		data = append(data, b)
	}
	return data, nil
}

func (r *tileReader) SaveTiles([]tlog.Tile, [][]byte) {}

func TestTilePaths(t *testing.T) {
	for _, tc := range []struct {
		tile tlog.Tile
		path string
	}{
		{tlog.Tile{H: 8, L: 0, N: 0, W: 256}, "tile/0/000"},
		{tlog.Tile{H: 8, L: 0, N: 1234067, W: 256}, "tile/0/x001/x234/067"},
		{tlog.Tile{H: 8, L: 2, N: 1000, W: 1}, "tile/2/x001/000.p/1"},
		{tlog.Tile{H: 8, L: -1, N: 5, W: 255}, "tile/entries/005.p/255"},
		{tlog.Tile{H: 8, L: -1, N: 999, W: 256}, "tile/entries/999"},
	} {
		if got := translog.TilePath(tc.tile); got != tc.path {
			t.Errorf("TilePath(%+v) = %q, want %q", tc.tile, got, tc.path)
		}
		if got, err := translog.ParseTilePath(tc.path); err != nil || got != tc.tile {
			t.Errorf("ParseTilePath(%q) = %+v, %v", tc.path, got, err)
		}
	}
	for _, bad := range []string{
		"", "tile", "tile/0", "tile/0/", "tile/00/000", "tile/-1/000", "tile/64/000", "tile/data/000",
		"tile/0/0", "tile/0/0000", "tile/0/x000/001", "tile/0/001/002", "tile/0/x1/002", "tile/0/000.p/0",
		"tile/0/000.p/256", "tile/0/000.p/01", "tile/0/000.p/", "tile/8/0/000", "tile/entries/000.p/1/",
		"/tile/0/000", "tile/0/+00", "tile/0/x999/x999/x999/x999/x999/x999/999",
	} {
		if _, err := translog.ParseTilePath(bad); !errors.Is(err, translog.ErrFormat) {
			t.Errorf("ParseTilePath(%q): %v, want ErrFormat", bad, err)
		}
	}
}

// TestAuditFromTiles builds a log of 70,000 entries (more than 256², so
// level-2 tiles exist), fetches every tile the tree has, and audits the
// whole log from the tiles and a signed checkpoint only, with x/mod's
// client-side tile code: every stored hash the client reads is
// authenticated against the checkpoint's root, and every entry of the
// entry bundles hashes to its leaf.
func TestAuditFromTiles(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a 70,000-entry log")
	}
	ctx := context.Background()
	db, l := newLog(t)
	const n = 70_000
	// Batches of uneven sizes, so batch edges fall mid-tile and the first
	// append of each batch reads the tree's edge from the database.
	for lo := 0; lo < n; {
		hi := min(lo+9_999, n)
		appendTx(t, db, l, entries(lo, hi)...)
		lo = hi
	}
	// The partial tiles of an older tree stay readable after growth.
	old, err := l.ReadTile(ctx, "tile/0/000.p/7")
	if err != nil {
		t.Fatal(err)
	}
	c, err := translog.OpenCheckpoint(mustCheckpoint(t, l), testVerifier(t, testVkey))
	if err != nil {
		t.Fatal(err)
	}
	if c.Size != n {
		t.Fatalf("checkpoint size %d", c.Size)
	}

	// Every tile: hash tiles of all levels and entry bundles.
	tr := &tileReader{l: l, paths: map[string]bool{}}
	tiles := tlog.NewTiles(translog.TileHeight, 0, n)
	levels := map[int]int{}
	for _, tile := range tiles {
		levels[tile.L]++
	}
	if levels[2] == 0 {
		t.Fatalf("no level-2 tile in a tree of %d: %v", n, levels)
	}
	var bundles []tlog.Tile // entry bundles mirror the level-0 tiles
	for _, tile := range tiles {
		if tile.L == 0 {
			tile.L = -1
			bundles = append(bundles, tile)
		}
	}
	tree := tlog.Tree{N: c.Size, Hash: c.Hash}
	thr := tlog.TileHashReader(tree, tr)
	if h, err := tlog.TreeHash(tree.N, thr); err != nil || h != c.Hash {
		t.Fatalf("tree hash from tiles = %v, %v", h, err)
	}
	leafIndexes := make([]int64, n)
	for i := range leafIndexes {
		leafIndexes[i] = tlog.StoredHashIndex(0, int64(i))
	}
	leaves, err := thr.ReadHashes(leafIndexes) // authenticated against c.Hash
	if err != nil {
		t.Fatal(err)
	}
	i := 0
	for _, b := range bundles {
		p := translog.TilePath(b)
		data, err := l.ReadTile(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		for k := 0; k < b.W; k++ {
			if len(data) < 2 || len(data) < 2+int(binary.BigEndian.Uint16(data)) {
				t.Fatalf("bundle %s truncated at entry %d", p, k)
			}
			e := data[2 : 2+binary.BigEndian.Uint16(data)]
			data = data[2+len(e):]
			if tlog.RecordHash(e) != leaves[i] {
				t.Fatalf("entry %d of bundle %s does not hash to leaf %d", k, p, i)
			}
			if !bytes.Equal(e, entry(i)) {
				t.Fatalf("entry %d = %q", i, e)
			}
			i++
		}
		if len(data) != 0 {
			t.Fatalf("bundle %s has %d trailing bytes", p, len(data))
		}
	}
	if i != n {
		t.Fatalf("bundles hold %d entries, want %d", i, n)
	}
	// The client read every hash tile of the tree, and they are exactly
	// the tiles NewTiles lists.
	for _, tile := range tiles {
		p := translog.TilePath(tile)
		if !tr.paths[p] {
			t.Errorf("tile %s not read by the audit", p)
		}
		data, err := l.ReadTile(ctx, p)
		if err != nil || len(data) != tile.W*tlog.HashSize {
			t.Errorf("ReadTile(%s) = %d bytes, %v", p, len(data), err)
		}
	}
	if len(tr.paths) != len(tiles) {
		t.Errorf("audit read %d tiles, the tree has %d", len(tr.paths), len(tiles))
	}
	if full, _ := l.ReadTile(ctx, "tile/0/000"); !bytes.Equal(old, full[:7*tlog.HashSize]) {
		t.Errorf("partial tile 0/000.p/7 is not a prefix of the full tile")
	}

	// Beyond the tree.
	for _, p := range []string{
		fmt.Sprintf("tile/0/%03d", n/256),                     // the last level-0 tile is partial
		fmt.Sprintf("tile/0/%03d.p/%d", n/256, n%256+1),       // wider than present
		fmt.Sprintf("tile/entries/%03d.p/%d", n/256, n%256+1), // same for entries
		"tile/1/001", "tile/2/000", "tile/2/000.p/2", "tile/3/000.p/1", "tile/63/000.p/1",
		"tile/0/x999/999", "tile/entries/x001/000",
	} {
		if _, err := l.ReadTile(ctx, p); !errors.Is(err, translog.ErrNotFound) {
			t.Errorf("ReadTile(%s): %v, want ErrNotFound", p, err)
		}
	}
	if _, err := l.ReadTile(ctx, "tile/0/1"); !errors.Is(err, translog.ErrFormat) {
		t.Errorf("ReadTile of a malformed path: %v, want ErrFormat", err)
	}
}

func TestReadTileSmallTree(t *testing.T) {
	ctx := context.Background()
	db, l := newLog(t)
	if _, err := l.ReadTile(ctx, "tile/entries/000.p/1"); !errors.Is(err, translog.ErrNotFound) {
		t.Errorf("tile of an empty log: %v, want ErrNotFound", err)
	}
	appendTx(t, db, l, []byte("x"), bytes.Repeat([]byte("y"), translog.MaxEntrySize))
	got, err := l.ReadTile(ctx, "tile/entries/000.p/2")
	if err != nil {
		t.Fatal(err)
	}
	want := append([]byte{0, 1, 'x', 0xff, 0xff}, bytes.Repeat([]byte("y"), translog.MaxEntrySize)...)
	if !bytes.Equal(got, want) {
		t.Errorf("entry bundle = %x...", got[:8])
	}
	h, err := l.ReadTile(ctx, "tile/0/000.p/2")
	if err != nil {
		t.Fatal(err)
	}
	l0, l1 := tlog.RecordHash([]byte("x")), tlog.RecordHash(bytes.Repeat([]byte("y"), translog.MaxEntrySize))
	if !bytes.Equal(h, append(l0[:], l1[:]...)) {
		t.Errorf("hash tile 0/000.p/2 is not the two leaf hashes")
	}
}
