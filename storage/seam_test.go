package storage_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestSeam: outside the storage layer (this package and its backends) no
// code names a *sql.DB, *sql.Tx or *sql.Conn: the packages take a
// *storage.DB, a *storage.Tx or a storage.Querier, so that a second backend
// is one more package. Tests, and the test kits (testkit/, imported by
// tests only), may open a database as it is (sql.Open) to inspect or
// prepare it.
func TestSeam(t *testing.T) {
	root := filepath.Join("..")
	fset := token.NewFileSet()
	files := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			if rel == "storage" || rel == "tools" || rel == "testdata" || strings.HasPrefix(d.Name(), ".") && rel != "." {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		files++
		local := ""
		for _, im := range f.Imports {
			if p, _ := strconv.Unquote(im.Path.Value); p == "database/sql" {
				local = "sql"
				if im.Name != nil {
					local = im.Name.Name
				}
			}
		}
		if local == "" {
			return nil
		}
		test := strings.HasSuffix(path, "_test.go") || strings.HasPrefix(filepath.ToSlash(rel), "testkit/")
		ast.Inspect(f, func(n ast.Node) bool {
			sel, ok := n.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			if id, ok := sel.X.(*ast.Ident); ok && id.Name == local {
				switch sel.Sel.Name {
				case "DB", "Tx", "Conn":
					t.Errorf("%s: database/sql.%s outside the storage layer", fset.Position(sel.Pos()), sel.Sel.Name)
				case "Open", "OpenDB":
					if !test {
						t.Errorf("%s: database/sql.%s outside the storage layer", fset.Position(sel.Pos()), sel.Sel.Name)
					}
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 100 {
		t.Fatalf("walked %d Go files: not the module", files)
	}
}
