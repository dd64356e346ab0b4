package shredd_test

import (
	"cmp"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// maxComplexity is the highest cyclomatic complexity a function of the
// module's non-test code may have (issue 28).
const maxComplexity = 30

// funcComplexity is the cyclomatic complexity of one function.
type funcComplexity struct {
	complexity int
	pkg, name  string
	pos        token.Position
}

func (f funcComplexity) String() string {
	return fmt.Sprintf("%d %s %s %s", f.complexity, f.pkg, f.name, f.pos)
}

// TestComplexity fails for any function of the module's non-test code
// whose cyclomatic complexity, counted as gocyclo counts it, is above
// maxComplexity, and logs the five highest (go test -run TestComplexity
// -v .).
func TestComplexity(t *testing.T) {
	var all []funcComplexity
	fset := token.NewFileSet()
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case "node_modules", "testdata", ".cache":
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		all = append(all, fileComplexities(fset, f)...)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(all) == 0 {
		t.Fatal("no function found: is the test run from the module's root?")
	}
	slices.SortStableFunc(all, func(a, b funcComplexity) int { return cmp.Compare(b.complexity, a.complexity) })
	for _, f := range all[:min(5, len(all))] {
		t.Log(f)
	}
	for _, f := range all {
		if f.complexity > maxComplexity {
			t.Errorf("%s: cyclomatic complexity above %d: split it into well-named functions", f, maxComplexity)
		}
	}
}

// fileComplexities returns the complexity of every function and method
// declared in f.
func fileComplexities(fset *token.FileSet, f *ast.File) []funcComplexity {
	var out []funcComplexity
	for _, decl := range f.Decls {
		if fn, ok := decl.(*ast.FuncDecl); ok {
			out = append(out, funcComplexity{
				complexity: complexity(fn),
				pkg:        f.Name.Name,
				name:       funcName(fn),
				pos:        fset.Position(fn.Pos()),
			})
		}
	}
	return out
}

// complexity is the cyclomatic complexity of a function as gocyclo
// counts it: 1, plus one for each if, for and range statement, each case
// and select clause but the default ones, and each && and ||, in the
// function's body and its function literals.
func complexity(fn *ast.FuncDecl) int {
	c := 1
	ast.Inspect(fn, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.IfStmt, *ast.ForStmt, *ast.RangeStmt:
			c++
		case *ast.CaseClause:
			if n.List != nil {
				c++
			}
		case *ast.CommClause:
			if n.Comm != nil {
				c++
			}
		case *ast.BinaryExpr:
			if n.Op == token.LAND || n.Op == token.LOR {
				c++
			}
		}
		return true
	})
	return c
}

// funcName names a function as gocyclo does: F, or (T).M or (*T).M for a
// method.
func funcName(fn *ast.FuncDecl) string {
	if fn.Recv == nil || len(fn.Recv.List) == 0 {
		return fn.Name.Name
	}
	return "(" + recvType(fn.Recv.List[0].Type) + ")." + fn.Name.Name
}

func recvType(x ast.Expr) string {
	switch t := x.(type) {
	case *ast.StarExpr:
		return "*" + recvType(t.X)
	case *ast.IndexExpr:
		return recvType(t.X)
	case *ast.IndexListExpr:
		return recvType(t.X)
	case *ast.Ident:
		return t.Name
	}
	return "BADRECV"
}

// TestComplexityCounts checks the count against gocyclo's own on
// functions of each construct (gocyclo gives 1, 6, 5, 4 and 5 for them).
func TestComplexityCounts(t *testing.T) {
	const src = `package p

func straight() int { return 1 }

func branches(a, b, c bool, xs []int) int {
	if a && b || c {
		return 0
	}
	for i := 0; i < 3; i++ {
	}
	for range xs {
	}
	return 1
}

func (s *S) cases(x int) int {
	switch x {
	case 1, 2:
		return 1
	case 3:
		return 2
	default:
		return 3
	}
	switch {
	case x > 0 && x < 9:
	}
	return 4
}

func (S) selects(a, b chan int) {
	select {
	case <-a:
	case v := <-b:
		_ = v
	case b <- 1:
	default:
	}
}

func literals(xs []int) func() bool {
	return func() bool {
		for _, x := range xs {
			if x > 0 || x < -9 {
				return true
			}
		}
		return len(xs) > 0 && xs[0] == 0
	}
}
`
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "p.go", src, 0)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int{"straight": 1, "branches": 6, "(*S).cases": 5, "(S).selects": 4, "literals": 5}
	for _, fc := range fileComplexities(fset, f) {
		if w, ok := want[fc.name]; !ok || fc.complexity != w {
			t.Errorf("%s: complexity %d, want %d", fc.name, fc.complexity, w)
		}
	}
}
