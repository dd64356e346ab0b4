package shredd_test

import (
	"cmp"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/shredd/shredd/storage/storagetest"
)

// The rules of the house (docs/design.md §2, issue 28), enforced here so
// that the layout cannot drift from the design: which shredd packages each
// package may import, which package owns each table, and where SQL text may
// live. go test -run TestHouse -v . logs the figures the design quotes.

const module = "github.com/shredd/shredd"

// allowed lists, for every package of the module, the shredd packages its
// non-test code may import. A package missing from this map, or an import
// not listed, fails TestHouseImports: a new arrow is a design decision, so
// it is written down here and in docs/design.md.
var allowed = map[string][]string{
	// Formats and leaves: no shredd imports (translog and bundle read
	// their own formats).
	"envelope":            nil,
	"attest":              nil,
	"storage":             nil,
	"ui":                  nil,
	"internal/crashpoint": nil,
	"internal/datadir":    nil,
	"internal/netaddr":    nil,
	"internal/jsonesc":    nil,
	"translog":            {"storage"},
	"bundle":              {"attest", "internal/jsonesc", "translog"},
	"witness":             {"internal/datadir", "translog"},
	// The domain root: types, sentinel errors and the interfaces the
	// services meet; it imports nothing of its own project.
	"shredd": nil,
	// Storage backends.
	"storage/sqlite":      {"internal/crashpoint", "internal/datadir", "storage"},
	"storage/postgres":    {"storage"},
	"storage/storagetest": {"storage"},
	// Owners of tables through storage.
	"journal":           {"attest", "envelope", "storage", "translog"},
	"access":            {"shredd", "internal/crashpoint", "storage"},
	"keystore":          {"shredd", "attest", "envelope", "internal/crashpoint", "journal", "storage"},
	"keystore/local":    {"shredd", "internal/crashpoint", "internal/datadir", "keystore"},
	"keystore/vault":    {"shredd", "envelope", "keystore"},
	"keystore/roottest": {"shredd", "keystore"},
	// The durable logs and their heads beside the root.
	"ledger": {"shredd", "envelope", "internal/crashpoint", "internal/datadir", "keystore"},
	// The derivation graph, under the registry of what exists.
	"derivation": {"shredd", "envelope", "storage"},
	"registry":   {"shredd", "derivation", "envelope", "internal/crashpoint", "keystore", "ledger", "storage"},
	// The two domain services, each on the registry, neither on the other.
	"sealing": {"shredd", "envelope", "keystore", "registry"},
	"erasure": {"shredd", "attest", "bundle", "envelope", "internal/crashpoint", "internal/datadir", "journal", "keystore", "ledger", "registry", "storage", "translog"},
	// HTTP and its clients.
	"api":               {"shredd", "bundle", "envelope", "internal/crashpoint", "internal/jsonesc", "translog", "ui"},
	"api/client":        {"attest", "envelope"},
	"api/client/verify": {"attest", "bundle"},
	// The composition root and the commands that own it.
	"cmd/shredd/node":  {"shredd", "access", "attest", "erasure", "internal/crashpoint", "internal/datadir", "journal", "keystore", "ledger", "registry", "sealing", "storage", "storage/postgres", "storage/sqlite", "translog"},
	"cmd/shredd":       {"access", "api", "api/client", "attest", "bundle", "cmd/shredd/node", "envelope", "erasure", "internal/datadir", "internal/netaddr", "keystore", "keystore/local", "keystore/vault", "ledger", "registry", "storage", "storage/sqlite", "translog", "witness"},
	"cmd/shredd-bench": {"shredd", "api/client", "cmd/shredd/node", "envelope", "internal/netaddr", "keystore", "keystore/local", "keystore/vault", "registry", "storage"},
	// Fixed, public test keys at the top level: tests, the vectors and the
	// evidence corpus only, never the binary (testkeys/binary_test.go).
	"testkeys": {"envelope"},
	// Test kits, named for what they start. shreddtest builds the stack
	// through cmd/shredd/node.Assemble, the one composition root: the one
	// arrow from testkit into cmd, named in docs/design.md.
	"testkit/testbin":      nil,
	"testkit/freeport":     nil,
	"testkit/pgtest":       {"testkit/freeport"},
	"testkit/vaulttest":    {"testkit/freeport"},
	"testkit/vectorgen":    {"envelope", "testkeys"},
	"testkit/evidence":     {"attest", "bundle", "testkeys", "translog"},
	"testkit/evidence/gen": {"testkit/evidence"},
	"testkit/shreddtest":   {"shredd", "access", "attest", "cmd/shredd/node", "erasure", "journal", "keystore", "keystore/local", "registry", "sealing", "storage", "storage/postgres", "storage/sqlite", "testkit/pgtest", "testkeys", "translog"},
	// Tools of the repository, not of the product.
	"tools/perfplot": nil,
}

// owners names the one package that owns each table and view the
// migrations create: only it (and the storage layer) may name the table in
// SQL text. Others ask the owner's methods.
var owners = map[string]string{
	"artifacts": "registry", "artifact_parents": "derivation", "lineage": "derivation",
	"lineage_staged": "derivation", "parents_staged": "derivation", "lineage_all": "derivation",
	"read_links": "derivation",
	"kinds":      "registry", "leases": "registry", "registry_wal": "registry",
	"buckets": "keystore", "subjects": "keystore", "epochs": "keystore",
	"evictions": "keystore", "keystore_meta": "keystore", "nodes": "keystore", "reinstatements": "keystore",
	"forgets": "erasure", "holders": "erasure", "holder_acks": "erasure",
	"acked": "erasure", "inventories": "erasure", "probes": "erasure", "forget_aliases": "erasure",
	"subject_log": "journal", "forget_log": "journal", "epoch_log": "journal",
	"log_entries": "translog", "log_hashes": "translog", "log_meta": "translog",
	"readiness": "storage", "secrets": "storage", "migrations": "storage",
	"tokens": "access",
}

// storageLayer are the packages that may hold any SQL: the storage seam,
// its backends, its conformance suite and the PostgreSQL test kit (which
// creates databases).
var storageLayer = map[string]bool{
	"storage": true, "storage/sqlite": true, "storage/postgres": true,
	"storage/storagetest": true, "testkit/pgtest": true,
}

// goPackage is what go list -json says of one package.
type goPackage struct {
	ImportPath string
	Dir        string
	GoFiles    []string
	Imports    []string
}

func listPackages(t *testing.T) []goPackage {
	t.Helper()
	out, err := exec.Command("go", "list", "-json", "./...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	var pkgs []goPackage
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for dec.More() {
		var p goPackage
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		p.ImportPath = rel(p.ImportPath)
		pkgs = append(pkgs, p)
	}
	return pkgs
}

// rel is a module path relative to the module ("shredd" for the root).
func rel(path string) string {
	r := strings.TrimPrefix(strings.TrimPrefix(path, module), "/")
	if r == "" {
		return "shredd"
	}
	return r
}

// shreddImports are the module's packages p imports.
func shreddImports(p goPackage) []string {
	var out []string
	for _, imp := range p.Imports {
		if imp == module || strings.HasPrefix(imp, module+"/") {
			out = append(out, rel(imp))
		}
	}
	return out
}

// folder is the top-level folder of a package ("shredd" for the root).
func folder(pkg string) string {
	f, _, _ := strings.Cut(pkg, "/")
	return f
}

// TestHouseImports: every package imports only what allowed lists for it,
// and no arrow between top-level folders lies on a cycle of folders (a
// drawing of the folders reads one way, bottom to top).
func TestHouseImports(t *testing.T) {
	pkgs := listPackages(t)
	arrows := 0
	folders := map[[2]string]int{}
	for _, p := range pkgs {
		may, ok := allowed[p.ImportPath]
		if !ok {
			t.Errorf("package %s is not in house_test.go's allowed map (and docs/design.md §2)", p.ImportPath)
		}
		for _, imp := range shreddImports(p) {
			arrows++
			if ok && !slices.Contains(may, imp) {
				t.Errorf("%s imports %s, which the house does not allow (house_test.go, docs/design.md §2)", p.ImportPath, imp)
			}
			if a, b := folder(p.ImportPath), folder(imp); a != b {
				folders[[2]string{a, b}]++
			}
		}
	}
	for pkg := range allowed {
		if !slices.ContainsFunc(pkgs, func(p goPackage) bool { return p.ImportPath == pkg }) {
			t.Errorf("allowed names %s, which is not a package of the module", pkg)
		}
	}
	onCycle := 0
	for arrow, n := range folders {
		if reaches(folders, arrow[1], arrow[0]) {
			onCycle += n
			t.Errorf("folder %s imports %s and %s reaches back to %s: a folder cycle", arrow[0], arrow[1], arrow[1], arrow[0])
		}
	}
	cross := 0
	for _, n := range folders {
		cross += n
	}
	t.Logf("packages %d, import arrows %d, between top-level folders %d, on a folder cycle %d", len(pkgs), arrows, cross, onCycle)
}

// reaches says whether folder from reaches folder to along edges.
func reaches(edges map[[2]string]int, from, to string) bool {
	seen := map[string]bool{from: true}
	stack := []string{from}
	for len(stack) > 0 {
		f := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if f == to {
			return true
		}
		for e := range edges {
			if e[0] == f && !seen[e[1]] {
				seen[e[1]] = true
				stack = append(stack, e[1])
			}
		}
	}
	return false
}

// sqlStatement is a string literal that begins a SQL statement (the code
// writes SQL keywords in capitals).
var sqlStatement = regexp.MustCompile(`^\s*(SELECT|INSERT|UPDATE|DELETE|CREATE|WITH|ALTER|DROP|PRAGMA|REPLACE|VACUUM|BEGIN|COMMIT|ROLLBACK|SAVEPOINT|RELEASE|ANALYZE|TRUNCATE|LOCK)\s`)

// tableRef finds the tables a piece of SQL text names.
var tableRef = regexp.MustCompile(`(?i)\b(?:FROM|JOIN|INTO|UPDATE|TABLE|EXISTS)\s+([a-z_][a-z0-9_]*)`)

// literals are the string literals of the non-test files of p.
func literals(t *testing.T, p goPackage) []string {
	t.Helper()
	var out []string
	fset := token.NewFileSet()
	for _, name := range p.GoFiles {
		f, err := parser.ParseFile(fset, filepath.Join(p.Dir, name), nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if lit, ok := n.(*ast.BasicLit); ok && lit.Kind == token.STRING {
				if s, err := strconv.Unquote(lit.Value); err == nil {
					out = append(out, s)
				}
			}
			return true
		})
	}
	return out
}

// migrationTables are the tables and views the migrations of both
// backends create, and the migrations table storage keeps.
func migrationTables(t *testing.T) map[string]bool {
	t.Helper()
	have := map[string]bool{"migrations": true}
	for _, dir := range []string{"storage/sqlite/migrations", "storage/postgres/migrations"} {
		names, err := storagetest.Tables(os.DirFS(dir))
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range names {
			have[n] = true
		}
	}
	return have
}

// TestHouseTables: every table and view has one owner, and SQL text naming
// a table lives only in its owner or the storage layer; api holds no SQL at
// all.
func TestHouseTables(t *testing.T) {
	tables := migrationTables(t)
	for name := range tables {
		if owners[name] == "" {
			t.Errorf("table %s has no owner in house_test.go (and docs/design.md §7)", name)
		}
	}
	for name, owner := range owners {
		if !tables[name] {
			t.Errorf("owners names %s, which no migration creates", name)
		}
		if _, ok := allowed[owner]; !ok {
			t.Errorf("owner %s of %s is not a package", owner, name)
		}
	}
	counts := map[string]int{}
	for _, p := range listPackages(t) {
		if storageLayer[p.ImportPath] {
			continue
		}
		for _, s := range literals(t, p) {
			if sqlStatement.MatchString(s) {
				counts[p.ImportPath]++
			}
			for _, m := range tableRef.FindAllStringSubmatch(s, -1) {
				name := strings.ToLower(m[1])
				if owner, ok := owners[name]; ok && owner != p.ImportPath {
					t.Errorf("%s names table %s in SQL text, which %s owns: %q", p.ImportPath, name, owner, firstLine(s))
				}
			}
		}
	}
	if counts["api"] > 0 {
		t.Errorf("api holds %d SQL statements: it asks domain methods, never a query", counts["api"])
	}
	total := 0
	var by []string
	for pkg, n := range counts {
		total += n
		by = append(by, fmt.Sprintf("%s %d", pkg, n))
	}
	slices.Sort(by)
	t.Logf("SQL statements outside the storage layer: %d (%s)", total, strings.Join(by, ", "))
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	l, _, _ := strings.Cut(s, "\n")
	if len(l) > 60 {
		l = l[:60]
	}
	return l
}

// TestHouseTypes logs the five types of non-test code with the most
// methods (issue 28 asked for the largest to be split by responsibility),
// and fails if any has more than maxMethods.
func TestHouseTypes(t *testing.T) {
	const maxMethods = 45
	type typeMethods struct {
		name string
		n    int
	}
	count := map[string]int{}
	fset := token.NewFileSet()
	for _, p := range listPackages(t) {
		for _, name := range p.GoFiles {
			f, err := parser.ParseFile(fset, filepath.Join(p.Dir, name), nil, parser.SkipObjectResolution)
			if err != nil {
				t.Fatal(err)
			}
			for _, d := range f.Decls {
				fd, ok := d.(*ast.FuncDecl)
				if !ok || fd.Recv == nil || len(fd.Recv.List) == 0 {
					continue
				}
				count[p.ImportPath+"."+receiverName(fd.Recv.List[0].Type)]++
			}
		}
	}
	var all []typeMethods
	for name, n := range count {
		all = append(all, typeMethods{name, n})
	}
	slices.SortFunc(all, func(a, b typeMethods) int {
		return cmp.Or(cmp.Compare(b.n, a.n), cmp.Compare(a.name, b.name))
	})
	var top []string
	for i, tm := range all {
		if tm.n > maxMethods {
			t.Errorf("%s has %d methods (at most %d): split it by responsibility", tm.name, tm.n, maxMethods)
		}
		if i < 5 {
			top = append(top, fmt.Sprintf("%s %d", tm.name, tm.n))
		}
	}
	t.Logf("types with the most methods: %s", strings.Join(top, ", "))
}

// receiverName is the type name of a method receiver.
func receiverName(e ast.Expr) string {
	for {
		switch x := e.(type) {
		case *ast.StarExpr:
			e = x.X
		case *ast.IndexExpr:
			e = x.X
		case *ast.IndexListExpr:
			e = x.X
		case *ast.Ident:
			return x.Name
		default:
			return fmt.Sprintf("%T", e)
		}
	}
}

// TestHouseDesign: docs/design.md §2 states the same rules as allowed. Every
// package of the module is named there; a bullet "- `pkg` — ... May import:
// a, b, c." lists exactly allowed[pkg] ("the root package" for shredd), one
// that says it imports nothing of shredd or of its own project has none, and
// the packages of the paragraph of leaves import nothing of shredd.
func TestHouseDesign(t *testing.T) {
	b, err := os.ReadFile("docs/design.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	start := strings.Index(doc, "\n## 2.")
	end := strings.Index(doc[start+1:], "\n## ")
	if start < 0 || end < 0 {
		t.Fatal("docs/design.md has no §2")
	}
	sec := doc[start : start+1+end]
	named := map[string]bool{}
	for _, m := range regexp.MustCompile("`([a-z][a-z0-9/-]*)`").FindAllStringSubmatch(sec, -1) {
		named[m[1]] = true
	}
	for pkg := range allowed {
		if !named[pkg] && !(pkg == "shredd" && strings.Contains(sec, "`shredd` (root package)")) {
			t.Errorf("docs/design.md §2 does not name package %s", pkg)
		}
	}
	para := strings.Split(strings.ReplaceAll(sec, "\n  ", " "), "\n")
	bullet := regexp.MustCompile("^- `([a-z][a-z0-9/-]*)`")
	checked := 0
	for _, p := range para {
		m := bullet.FindStringSubmatch(p)
		if m == nil {
			continue
		}
		pkg := m[1]
		want, ok := allowed[pkg]
		if !ok {
			t.Errorf("docs/design.md §2 describes %s, which house_test.go's allowed map lacks", pkg)
			continue
		}
		var got []string
		switch _, list, found := strings.Cut(p, "May import: "); {
		case found:
			list, _, _ = strings.Cut(list, ".")
			for _, f := range strings.Split(list, ",") {
				f = strings.TrimSpace(f)
				if f == "the root package" {
					f = "shredd"
				}
				got = append(got, f)
			}
		case strings.Contains(p, "Imports nothing of shredd") || strings.Contains(p, "Imports nothing of its own project"):
		default:
			t.Errorf("docs/design.md §2's %s says neither \"May import:\" nor \"Imports nothing of shredd\"", pkg)
			continue
		}
		checked++
		if !slices.Equal(sorted(got), sorted(want)) {
			t.Errorf("docs/design.md §2 says %s may import %v; house_test.go allows %v", pkg, got, want)
		}
	}
	for _, p := range para {
		if !strings.HasPrefix(p, "**Formats and leaves**") {
			continue
		}
		for _, m := range regexp.MustCompile("`([a-z][a-z0-9/]*)` \\(").FindAllStringSubmatch(p, -1) {
			if len(allowed[m[1]]) != 0 {
				t.Errorf("docs/design.md §2 lists %s among the leaves; house_test.go lets it import %v", m[1], allowed[m[1]])
			}
		}
	}
	t.Logf("docs/design.md §2: %d packages' imports checked against allowed", checked)
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}
