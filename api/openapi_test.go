package api_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	gotoken "go/token"
	"io"
	"math"
	"mime"
	"net/http"
	"net/url"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/shredd/shredd/access"
	"github.com/shredd/shredd/api"
)

// notYetWired are the documented routes the router may still lack: they are
// being wired in api.go. A route of this list that the router has is held
// to the document like any other.
var notYetWired = map[string]bool{"GET /metrics": true, "GET /v1/openapi.json": true}

// walkthrough is the order in which TestOpenAPIExamples replays the named
// examples of the document (operation id, example name). Ids and
// ciphertexts that an example returns are what later examples send.
var walkthrough = []struct{ op, example string }{
	{"health", "ok"},
	{"live", "ok"},
	{"ready", "ok"},
	{"openapi", "document"},
	{"putKind", "episodic"},
	{"putKind", "summary"},
	{"putKind", "embedding"},
	{"putKind", "update"},
	{"listKinds", "all"},
	{"encrypt", "record"},
	{"encrypt", "derived"},
	{"encrypt", "batch"},
	{"decrypt", "record"},
	{"decrypt", "batch"},
	{"releaseLease", "record"},
	{"registerArtifact", "embedding"},
	{"registerHolder", "ann"},
	{"getArtifact", "summary"},
	{"forget", "preview"},
	{"forget", "alice"},
	{"forget", "again"},
	{"decrypt", "shredded"},
	{"listPurges", "ann"},
	{"reportInventory", "clean"},
	{"getForget", "committed"},
	{"listForgets", "committed"},
	{"runEpoch", "run"},
	{"getForget", "shredded"},
	{"verifyForget", "shredded"},
	{"getExport", "not_erased"},
	{"logKey", "key"},
	{"logCheckpoint", "current"},
	{"logProof", "first"},
	{"logConsistency", "since_first"},
	{"metrics", "scrape"},
	{"dataKey", "record"},
	{"dataKey", "batch"},
}

// idKeys are the response fields whose values differ from run to run and
// that later requests send back: the replay maps each documented value to
// the one the server returned, and substitutes it in later requests.
var idKeys = map[string]bool{"artifact": true, "ciphertext": true, "forget": true, "id": true}

// volatileKeys are response fields whose values differ from run to run and
// are never sent back: their documented value is not compared (the schema
// still checks their type and format).
var volatileKeys = map[string]bool{"created_at": true, "requested_at": true, "committed_at": true, "rekeyed_at": true,
	"shredded_at": true, "deadline": true, "started_at": true, "finished_at": true, "request_id": true,
	"issued_at": true, "expires_at": true, "released_at": true, "commitment_salt": true,
	"header": true, "key": true}

var httpMethods = []string{"get", "put", "post", "delete", "patch", "head", "options", "trace"}

// openAPI is the parsed document.
type openAPI struct {
	root map[string]any
	ops  map[string]*operation // by operation id
}

type operation struct {
	id, method, path string // method in upper case
	obj              map[string]any
}

func (o *operation) route() string { return o.method + " " + o.path }

func loadOpenAPI(t *testing.T) *openAPI {
	t.Helper()
	var root map[string]any
	if err := json.Unmarshal(api.OpenAPIDocument(), &root); err != nil {
		t.Fatalf("openapi.json is not valid JSON: %v", err)
	}
	d := &openAPI{root: root, ops: map[string]*operation{}}
	paths, _ := root["paths"].(map[string]any)
	for path, item := range paths {
		for _, m := range httpMethods {
			obj, ok := item.(map[string]any)[m].(map[string]any)
			if !ok {
				continue
			}
			id, _ := obj["operationId"].(string)
			if id == "" || d.ops[id] != nil {
				t.Fatalf("%s %s: missing or duplicate operationId %q", m, path, id)
			}
			d.ops[id] = &operation{id: id, method: strings.ToUpper(m), path: path, obj: obj}
		}
	}
	return d
}

// sortedOps returns the operations by route.
func (d *openAPI) sortedOps() []*operation {
	ops := make([]*operation, 0, len(d.ops))
	for _, o := range d.ops {
		ops = append(ops, o)
	}
	sort.Slice(ops, func(i, j int) bool { return ops[i].route() < ops[j].route() })
	return ops
}

// pointer resolves a local reference ("#/components/schemas/ID").
func (d *openAPI) pointer(ref string) (any, error) {
	p, ok := strings.CutPrefix(ref, "#/")
	if !ok {
		return nil, fmt.Errorf("reference %q is not local", ref)
	}
	var cur any = d.root
	for _, tok := range strings.Split(p, "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("reference %q does not resolve", ref)
		}
		if cur, ok = m[tok]; !ok {
			return nil, fmt.Errorf("reference %q does not resolve", ref)
		}
	}
	return cur, nil
}

// deref follows the $ref of a response, parameter or header object.
func (d *openAPI) deref(t *testing.T, v any) map[string]any {
	t.Helper()
	m, _ := v.(map[string]any)
	for i := 0; m != nil && m["$ref"] != nil; i++ {
		r, err := d.pointer(m["$ref"].(string))
		if err != nil || i > 8 {
			t.Fatalf("%v", err)
		}
		m, _ = r.(map[string]any)
	}
	return m
}

func (d *openAPI) parameters(t *testing.T, o *operation) []map[string]any {
	ps, _ := o.obj["parameters"].([]any)
	out := make([]map[string]any, len(ps))
	for i, p := range ps {
		out[i] = d.deref(t, p)
	}
	return out
}

// scopes returns an operation's x-shredd-scopes, and whether it has them
// (an operation without them needs no token).
func scopesOf(o *operation) ([]string, bool) {
	raw, ok := o.obj["x-shredd-scopes"].([]any)
	var out []string
	for _, s := range raw {
		out = append(out, s.(string))
	}
	return out, ok
}

// routerRoutes lists "METHOD /pattern" of every route of the router.
func routerRoutes(t *testing.T, h http.Handler) map[string]bool {
	t.Helper()
	rs, ok := h.(chi.Routes)
	if !ok {
		t.Fatalf("the handler is a %T, not a chi router: the routes cannot be listed", h)
	}
	out := map[string]bool{}
	err := chi.Walk(rs, func(method, route string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
		// A chi catch-all ("/v1/log/tile/*": a path of several segments)
		// is documented as a final path parameter named path: OpenAPI has
		// no catch-all.
		if r, ok := strings.CutSuffix(route, "/*"); ok {
			route = r + "/{path}"
		}
		out[method+" "+route] = true
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestOpenAPIRoutes checks that the document describes every route of the
// router and no other.
func TestOpenAPIRoutes(t *testing.T) {
	e := newEnv(t, 0)
	d := loadOpenAPI(t)
	inRouter := routerRoutes(t, e.srv.Config.Handler)
	inDoc := map[string]bool{}
	for _, o := range d.ops {
		inDoc[o.route()] = true
	}
	for r := range inRouter {
		if !inDoc[r] {
			t.Errorf("route %s is not in api/openapi.json", r)
		}
	}
	for r := range inDoc {
		switch {
		case inRouter[r]:
		case notYetWired[r]:
			t.Logf("documented route %s is not wired in the router yet", r)
		default:
			t.Errorf("api/openapi.json documents %s, which the router does not have", r)
		}
	}
	if len(inRouter) < 11 {
		t.Errorf("chi.Walk found only %d routes: %v", len(inRouter), inRouter)
	}
}

// TestOpenAPIDocument checks the document on its own: version, references,
// operations, path parameters, security, and every example against its
// schema.
func TestOpenAPIDocument(t *testing.T) {
	d := loadOpenAPI(t)
	if v, _ := d.root["openapi"].(string); !regexp.MustCompile(`^3\.1\.[0-9]+$`).MatchString(v) {
		t.Errorf("openapi is %q, want 3.1.x", v)
	}
	info, _ := d.root["info"].(map[string]any)
	if info["title"] == "" || info["title"] == nil || info["version"] == "" || info["version"] == nil {
		t.Errorf("info needs a title and a version: %v", info)
	}
	if _, ok := d.root["security"]; ok {
		t.Errorf("no global security: each operation states its own")
	}
	// Every reference resolves.
	var walk func(v any, at string)
	walk = func(v any, at string) {
		switch v := v.(type) {
		case map[string]any:
			if ref, ok := v["$ref"].(string); ok {
				if _, err := d.pointer(ref); err != nil {
					t.Errorf("%s: %v", at, err)
				}
			}
			for k, x := range v {
				walk(x, at+"/"+k)
			}
		case []any:
			for i, x := range v {
				walk(x, at+"/"+strconv.Itoa(i))
			}
		}
	}
	walk(d.root, "#")

	v := newValidator(d)
	tmpl := regexp.MustCompile(`\{([^}]+)\}`)
	for _, o := range d.sortedOps() {
		t.Run(o.route(), func(t *testing.T) {
			if s, _ := o.obj["summary"].(string); s == "" {
				t.Errorf("no summary")
			}
			// Path parameters match the template.
			var want, got []string
			for _, m := range tmpl.FindAllStringSubmatch(o.path, -1) {
				want = append(want, m[1])
			}
			for _, p := range d.parameters(t, o) {
				if p["in"] == "path" {
					got = append(got, p["name"].(string))
					if p["required"] != true {
						t.Errorf("path parameter %v is not required", p["name"])
					}
				}
				for name, ex := range examplesOf(p) {
					v.check(t, p["schema"], ex, "parameter "+p["name"].(string)+" example "+name)
				}
			}
			slices.Sort(want)
			slices.Sort(got)
			if !slices.Equal(want, got) {
				t.Errorf("path parameters %v, the template has %v", got, want)
			}
			// Security: explicit on every operation, and the same as
			// x-shredd-scopes (any one scope, or admin).
			sec, ok := o.obj["security"].([]any)
			if !ok {
				t.Fatalf("no security array (use [] for routes without a token)")
			}
			scopes, secured := scopesOf(o)
			var alts []string
			for _, req := range sec {
				for name, sc := range req.(map[string]any) {
					if name != "bearerAuth" || len(sc.([]any)) != 1 {
						t.Errorf("security requirement %v: want one bearerAuth scope", req)
						continue
					}
					alts = append(alts, sc.([]any)[0].(string))
				}
			}
			if !secured {
				if len(alts) != 0 {
					t.Errorf("security %v without x-shredd-scopes", alts)
				}
			} else {
				want := slices.Clone(scopes)
				if !slices.Contains(want, access.ScopeAdmin) {
					want = append(want, access.ScopeAdmin)
				}
				slices.Sort(want)
				slices.Sort(alts)
				if !slices.Equal(want, alts) {
					t.Errorf("security scopes %v, x-shredd-scopes %v (and admin)", alts, scopes)
				}
				for _, sc := range scopes {
					if !slices.Contains(access.AllScopes, sc) {
						t.Errorf("unknown scope %q", sc)
					}
				}
				resp, _ := o.obj["responses"].(map[string]any)
				if resp["401"] == nil || resp["403"] == nil {
					t.Errorf("a route with a token needs documented 401 and 403 responses")
				}
				if desc, _ := o.obj["description"].(string); !strings.Contains(desc, "Scopes:") {
					t.Errorf("the description does not state the scopes")
				}
			}
			// Request examples match the request schema.
			if rb := d.deref(t, o.obj["requestBody"]); rb != nil {
				for mt, c := range rb["content"].(map[string]any) {
					c := c.(map[string]any)
					for name, ex := range examplesOf(c) {
						v.check(t, c["schema"], ex, "request "+mt+" example "+name)
					}
				}
			}
			// Response examples match the response schema; problem
			// examples match their status.
			resp, _ := o.obj["responses"].(map[string]any)
			if len(resp) == 0 {
				t.Fatalf("no responses")
			}
			for status, r := range resp {
				r := d.deref(t, r)
				if r["description"] == nil {
					t.Errorf("response %s has no description", status)
				}
				content, _ := r["content"].(map[string]any)
				for mt, c := range content {
					c := c.(map[string]any)
					for name, ex := range examplesOf(c) {
						v.check(t, c["schema"], ex, "response "+status+" "+mt+" example "+name)
						if mt != "application/problem+json" {
							continue
						}
						p := ex.(map[string]any)
						if p["type"] != "urn:shredd:problem:"+fmt.Sprint(p["code"]) {
							t.Errorf("response %s example %s: type %v for code %v", status, name, p["type"], p["code"])
						}
						if n, err := strconv.Atoi(status); err == nil && p["status"] != float64(n) {
							t.Errorf("response %s example %s has status %v", status, name, p["status"])
						}
					}
				}
			}
		})
	}
}

// examplesOf returns the examples of a parameter or media type object:
// its named examples, or its single example as "".
func examplesOf(obj map[string]any) map[string]any {
	out := map[string]any{}
	if ex, ok := obj["example"]; ok {
		out[""] = ex
	}
	exs, _ := obj["examples"].(map[string]any)
	for name, ex := range exs {
		out[name] = ex.(map[string]any)["value"]
	}
	return out
}

// TestOpenAPIErrorCodes checks that the document lists every error code the
// package can send, and no other: the codes are read from the package's
// source (problemError and Problem literals, badRequest calls, errorMap).
func TestOpenAPIErrorCodes(t *testing.T) {
	d := loadOpenAPI(t)
	pc, err := d.pointer("#/components/schemas/ProblemCode")
	if err != nil {
		t.Fatal(err)
	}
	documented := map[string]bool{}
	for _, c := range pc.(map[string]any)["enum"].([]any) {
		documented[c.(string)] = true
	}
	inSource := map[string]string{} // code -> file
	files, _ := filepath.Glob("*.go")
	fset := gotoken.NewFileSet()
	str := func(e ast.Expr) (string, bool) {
		lit, ok := e.(*ast.BasicLit)
		if !ok || lit.Kind != gotoken.STRING {
			return "", false
		}
		s, err := strconv.Unquote(lit.Value)
		return s, err == nil
	}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(file, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.KeyValueExpr:
				if k, ok := n.Key.(*ast.Ident); ok && (k.Name == "code" || k.Name == "Code") {
					if s, ok := str(n.Value); ok {
						inSource[s] = f
					}
				}
			case *ast.CallExpr:
				if fn, ok := n.Fun.(*ast.Ident); ok && fn.Name == "badRequest" && len(n.Args) > 0 {
					if s, ok := str(n.Args[0]); ok {
						inSource[s] = f
					}
				}
			case *ast.ValueSpec:
				if len(n.Names) == 1 && n.Names[0].Name == "errorMap" && len(n.Values) == 1 {
					for _, el := range n.Values[0].(*ast.CompositeLit).Elts {
						row := el.(*ast.CompositeLit)
						if s, ok := str(row.Elts[2]); ok {
							inSource[s] = f
						}
					}
				}
			}
			return true
		})
	}
	if len(inSource) < 15 {
		t.Fatalf("found only %d codes in the source: %v", len(inSource), inSource)
	}
	for c, f := range inSource {
		if !documented[c] {
			t.Errorf("code %q (%s) is not in ProblemCode of api/openapi.json", c, f)
		}
		desc, _ := pc.(map[string]any)["description"].(string)
		if !strings.Contains(desc, "`"+c+"`") {
			t.Errorf("code %q is not in the table of ProblemCode's description", c)
		}
	}
	for c := range documented {
		if inSource[c] == "" {
			t.Errorf("api/openapi.json documents code %q, which the package never sends", c)
		}
	}
}

// TestOpenAPIExamples replays the named examples of the document, in the
// order of walkthrough, against a real server: each request is sent as
// documented (with the ids and ciphertexts the server returned for earlier
// examples) and must get the documented status, media type and body (up to
// the values of volatileKeys), and a body that matches the schema.
func TestOpenAPIExamples(t *testing.T) {
	e := newEnv(t, 0)
	d := loadOpenAPI(t)
	v := newValidator(d)
	wired := routerRoutes(t, e.srv.Config.Handler)

	// Every operation-level response example is in the walkthrough, and
	// every step names one.
	steps := map[string]bool{}
	for _, st := range walkthrough {
		steps[st.op+"/"+st.example] = true
	}
	for _, o := range d.sortedOps() {
		resp, _ := o.obj["responses"].(map[string]any)
		for _, r := range resp {
			if r.(map[string]any)["$ref"] != nil {
				continue
			}
			content, _ := r.(map[string]any)["content"].(map[string]any)
			for _, c := range content {
				for name := range examplesOf(c.(map[string]any)) {
					if !steps[o.id+"/"+name] {
						t.Errorf("example %s/%s is not in the walkthrough", o.id, name)
					}
					delete(steps, o.id+"/"+name)
				}
			}
		}
	}
	for s := range steps {
		t.Errorf("walkthrough step %s has no response example", s)
	}
	if t.Failed() {
		t.FailNow()
	}

	r := &replayer{t: t, d: d, v: v, e: e, subst: map[string]string{}, seen: map[string]string{}}
	for _, st := range walkthrough {
		o := d.ops[st.op]
		if !wired[o.route()] && notYetWired[o.route()] {
			t.Logf("%s/%s: %s is not wired yet", st.op, st.example, o.route())
			continue
		}
		if !t.Run(st.op+"/"+st.example, func(t *testing.T) { r.t = t; r.replay(o, st.example) }) {
			break // later examples depend on this one
		}
	}
}

type replayer struct {
	t     *testing.T
	d     *openAPI
	v     *validator
	e     *env
	subst map[string]string // documented value -> value of this run
	seen  map[string]string // value of this run -> documented value
}

// sub replaces, anywhere in v, the documented values of earlier responses
// by the values of this run.
func (r *replayer) sub(v any) any {
	switch v := v.(type) {
	case string:
		if s, ok := r.subst[v]; ok {
			return s
		}
		return v
	case []any:
		out := make([]any, len(v))
		for i, x := range v {
			out[i] = r.sub(x)
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, x := range v {
			out[k] = r.sub(x)
		}
		return out
	}
	return v
}

func (r *replayer) replay(o *operation, name string) {
	t := r.t
	path, query := o.path, url.Values{}
	for _, p := range r.d.parameters(t, o) {
		ex, ok := examplesOf(p)[name]
		if !ok {
			ex, ok = p["example"]
		}
		if !ok {
			if p["required"] == true {
				t.Fatalf("required parameter %v has no example %q", p["name"], name)
			}
			continue
		}
		val := fmt.Sprint(r.sub(ex))
		switch p["in"] {
		case "path":
			path = strings.ReplaceAll(path, "{"+p["name"].(string)+"}", url.PathEscape(val))
		case "query":
			query.Set(p["name"].(string), val)
		default:
			t.Fatalf("parameter in %v: not replayed", p["in"])
		}
	}
	if len(query) > 0 {
		path += "?" + query.Encode()
	}
	var body []byte
	if rb := r.d.deref(t, o.obj["requestBody"]); rb != nil {
		c, _ := rb["content"].(map[string]any)["application/json"].(map[string]any)
		if ex, ok := examplesOf(c)[name]; ok {
			var err error
			if body, err = json.Marshal(r.sub(ex)); err != nil {
				t.Fatal(err)
			}
		} else if rb["required"] == true {
			t.Fatalf("the request body is required and has no example %q", name)
		}
	}
	// The documented response: the one status whose content has the example.
	var status int
	var content map[string]any
	var want any
	for code, resp := range o.obj["responses"].(map[string]any) {
		rc, _ := r.d.deref(t, resp)["content"].(map[string]any)
		for _, c := range rc {
			if ex, ok := examplesOf(c.(map[string]any))[name]; ok {
				if status != 0 {
					t.Fatalf("example %q is documented under two responses", name)
				}
				n, err := strconv.Atoi(code)
				if err != nil {
					t.Fatalf("example %q under response %q: want a status code", name, code)
				}
				status, content, want = n, rc, ex
			}
		}
	}
	if status == 0 {
		t.Fatalf("no response example %q", name)
	}

	req, err := http.NewRequest(o.method, r.e.srv.URL+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if _, secured := scopesOf(o); secured {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != status {
		t.Fatalf("%s %s %s: status %d, documented %d: %s", o.method, path, body, resp.StatusCode, status, raw)
	}
	mt, _, err := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if err != nil || content[mt] == nil {
		t.Fatalf("content type %q is not documented for %d", resp.Header.Get("Content-Type"), status)
	}
	if resp.Header.Get("X-Request-Id") == "" {
		t.Errorf("no X-Request-Id")
	}
	if !strings.HasSuffix(mt, "json") {
		ex := want.(string)
		if strings.HasPrefix(ex, "# ") {
			// The metrics: every metric family of the example is there.
			for _, line := range strings.Split(ex, "\n") {
				if strings.HasPrefix(line, "# TYPE ") && !strings.Contains(string(raw), line+"\n") {
					t.Errorf("the response has no %q:\n%s", line, raw)
				}
			}
			return
		}
		// Other text (the log's key, checkpoint and proofs): the first line
		// (the key, the origin, the format's header) is the documented
		// one, and the text matches the schema; hashes and signatures
		// differ on every run.
		first, _, _ := strings.Cut(ex, "\n")
		if got, _, _ := strings.Cut(string(raw), "\n"); got != first {
			t.Errorf("first line %q, documented %q", got, first)
		}
		r.v.check(t, content[mt].(map[string]any)["schema"], string(raw), "the response")
		return
	}
	var got any
	if err := json.Unmarshal(raw, &got); err != nil {
		t.Fatalf("the response is not JSON: %q", raw)
	}
	if o.id == "openapi" && !bytes.Equal(raw, api.OpenAPIDocument()) {
		t.Errorf("GET %s does not serve api.OpenAPIDocument()", path)
	}
	r.v.check(t, content[mt].(map[string]any)["schema"], got, "the response")
	r.compare(want, got, "", "$")
}

// compare checks got against the documented example want: every documented
// field is there with the documented value, except volatile ones; values of
// idKeys map documented values to the values of this run, consistently.
func (r *replayer) compare(want, got any, key, at string) {
	t := r.t
	t.Helper()
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			t.Errorf("%s: got %v, documented an object", at, got)
			return
		}
		for k, wv := range w {
			gv, ok := g[k]
			if !ok {
				t.Errorf("%s: no field %q", at, k)
				continue
			}
			r.compare(wv, gv, k, at+"."+k)
		}
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			t.Errorf("%s: got %v, documented %d items", at, got, len(w))
			return
		}
		for i := range w {
			r.compare(w[i], g[i], key, at+"["+strconv.Itoa(i)+"]")
		}
	case string:
		g, ok := got.(string)
		switch {
		case !ok:
			t.Errorf("%s: got %v, documented a string", at, got)
		case r.subst[w] != "":
			if g != r.subst[w] {
				t.Errorf("%s: got %q, want %q (documented %q)", at, g, r.subst[w], w)
			}
		case idKeys[key]:
			if d, ok := r.seen[g]; ok && d != w {
				t.Errorf("%s: got %q, documented %q, but it is what the document calls %q", at, g, w, d)
			}
			r.subst[w], r.seen[g] = g, w
		case volatileKeys[key]:
		case g != w:
			t.Errorf("%s: got %q, documented %q", at, g, w)
		}
	default:
		if !volatileKeys[key] && fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s: got %v, documented %v", at, got, want)
		}
	}
}

// TestOpenAPIScopes checks the documented scopes against the server: every
// secured operation answers 401 without a token, 403 to a token with none
// of its scopes, and lets through a token with one of them (or admin); the
// others need no token. Every status is one the operation documents.
func TestOpenAPIScopes(t *testing.T) {
	e := newEnv(t, 0)
	d := loadOpenAPI(t)
	wired := routerRoutes(t, e.srv.Config.Handler)
	tokens := map[string]string{}
	for _, sc := range access.AllScopes {
		_, raw, err := e.tokens.Create(t.Context(), "only-"+sc, []string{sc}, "", 0)
		if err != nil {
			t.Fatal(err)
		}
		tokens[sc] = raw
	}
	for _, o := range d.sortedOps() {
		if !wired[o.route()] {
			continue
		}
		t.Run(o.route(), func(t *testing.T) {
			path := o.path
			for _, p := range d.parameters(t, o) {
				if p["in"] == "path" {
					path = strings.ReplaceAll(path, "{"+p["name"].(string)+"}", "00000000000000000000000000000000")
				}
			}
			documented := o.obj["responses"].(map[string]any)
			// send calls the operation without a body, with the
			// Authorization header auth (none when ""). Bodies need not be
			// JSON (the metrics are text); problems are decoded.
			send := func(auth string) reply {
				t.Helper()
				req, err := http.NewRequest(o.method, e.srv.URL+path, nil)
				if err != nil {
					t.Fatal(err)
				}
				if auth != "" {
					req.Header.Set("Authorization", auth)
				}
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				b, _ := io.ReadAll(resp.Body)
				r := reply{status: resp.StatusCode, ctype: resp.Header.Get("Content-Type")}
				if r.ctype == "application/problem+json" {
					if err := json.Unmarshal(b, &r.body); err != nil {
						t.Fatalf("%d: the problem is not JSON: %q", r.status, b)
					}
				}
				if documented[strconv.Itoa(r.status)] == nil && r.status < 500 {
					t.Errorf("status %d is not documented (%v)", r.status, r.body)
				}
				return r
			}
			scopes, secured := scopesOf(o)
			if !secured {
				if r := send(""); r.status == 401 || r.status == 403 {
					t.Fatalf("without a token: %d, documented as open", r.status)
				}
				return
			}
			if r := send(""); r.status != 401 || str(r, "code") != "unauthenticated" {
				t.Errorf("without a token: %d %v, want 401 unauthenticated", r.status, r.body)
			}
			for _, sc := range access.AllScopes {
				allowed := sc == access.ScopeAdmin || slices.Contains(scopes, sc)
				r := send("Bearer " + tokens[sc])
				if allowed && (r.status == 401 || r.status == 403) {
					t.Errorf("scope %s: %d %v, documented as allowed", sc, r.status, r.body)
				}
				if !allowed && (r.status != 403 || str(r, "code") != "forbidden") {
					t.Errorf("scope %s: %d %v, want 403 forbidden", sc, r.status, r.body)
				}
			}
		})
	}
}

// validator checks JSON values against the JSON Schema (2020-12) subset the
// document uses. It refuses keywords it does not implement, so that no
// constraint of the document goes unchecked.
type validator struct {
	d  *openAPI
	re map[string]*regexp.Regexp
}

func newValidator(d *openAPI) *validator { return &validator{d: d, re: map[string]*regexp.Regexp{}} }

// check reports the ways v does not match schema as errors of t.
func (v *validator) check(t *testing.T, schema, val any, what string) {
	t.Helper()
	if schema == nil {
		t.Errorf("%s: no schema", what)
		return
	}
	for _, e := range v.validate(schema, val, "$") {
		t.Errorf("%s: %s", what, e)
	}
}

func jsonType(val any) string {
	switch x := val.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case string:
		return "string"
	case float64:
		if x == math.Trunc(x) {
			return "integer"
		}
		return "number"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	return fmt.Sprintf("%T", val)
}

func (v *validator) validate(schema, val any, at string) []string {
	s, ok := schema.(map[string]any)
	if !ok {
		return []string{at + ": the schema is not an object"}
	}
	var errs []string
	fail := func(format string, args ...any) { errs = append(errs, at+": "+fmt.Sprintf(format, args...)) }
	for kw, arg := range s {
		switch kw {
		case "description", "title", "examples", "example":
		case "$ref":
			sub, err := v.d.pointer(arg.(string))
			if err != nil {
				fail("%v", err)
				continue
			}
			errs = append(errs, v.validate(sub, val, at)...)
		case "type":
			jt := jsonType(val)
			ok := false
			for _, want := range anyList(arg) {
				if want == jt || (want == "number" && jt == "integer") {
					ok = true
				}
			}
			if !ok {
				fail("%s, want type %v", jt, arg)
			}
		case "const":
			if !jsonEqual(val, arg) {
				fail("%v, want %v", val, arg)
			}
		case "enum":
			if !slices.ContainsFunc(arg.([]any), func(x any) bool { return jsonEqual(val, x) }) {
				fail("%v is not one of %v", val, arg)
			}
		case "properties":
			if obj, ok := val.(map[string]any); ok {
				for k, sub := range arg.(map[string]any) {
					if x, ok := obj[k]; ok {
						errs = append(errs, v.validate(sub, x, at+"."+k)...)
					}
				}
			}
		case "required":
			if obj, ok := val.(map[string]any); ok {
				for _, k := range arg.([]any) {
					if _, ok := obj[k.(string)]; !ok {
						fail("required field %q is missing", k)
					}
				}
			}
		case "additionalProperties":
			if arg != false {
				fail("additionalProperties other than false is not supported")
			}
			props, _ := s["properties"].(map[string]any)
			if obj, ok := val.(map[string]any); ok {
				for k := range obj {
					if _, ok := props[k]; !ok {
						fail("field %q is not in the schema", k)
					}
				}
			}
		case "items":
			if arr, ok := val.([]any); ok {
				for i, x := range arr {
					errs = append(errs, v.validate(arg, x, at+"["+strconv.Itoa(i)+"]")...)
				}
			}
		case "minItems", "maxItems":
			if arr, ok := val.([]any); ok {
				n := int(arg.(float64))
				if (kw == "minItems" && len(arr) < n) || (kw == "maxItems" && len(arr) > n) {
					fail("%d items, %s %d", len(arr), kw, n)
				}
			}
		case "minLength", "maxLength":
			if str, ok := val.(string); ok {
				n, l := int(arg.(float64)), len([]rune(str))
				if (kw == "minLength" && l < n) || (kw == "maxLength" && l > n) {
					fail("length %d, %s %d", l, kw, n)
				}
			}
		case "minimum", "maximum":
			if x, ok := val.(float64); ok {
				n := arg.(float64)
				if (kw == "minimum" && x < n) || (kw == "maximum" && x > n) {
					fail("%v, %s %v", x, kw, n)
				}
			}
		case "pattern":
			if str, ok := val.(string); ok {
				re := v.re[arg.(string)]
				if re == nil {
					re = regexp.MustCompile(arg.(string))
					v.re[arg.(string)] = re
				}
				if !re.MatchString(str) {
					fail("%q does not match %s", str, arg)
				}
			}
		case "format":
			if str, ok := val.(string); ok {
				if arg != "date-time" {
					fail("format %v is not supported", arg)
				} else if _, err := time.Parse(time.RFC3339Nano, str); err != nil {
					fail("%q is not a date-time", str)
				}
			}
		case "contentEncoding":
			if str, ok := val.(string); ok {
				if arg != "base64" {
					fail("contentEncoding %v is not supported", arg)
				} else if _, err := base64.StdEncoding.Strict().DecodeString(str); err != nil {
					fail("%q is not standard base64", str)
				}
			}
		case "oneOf":
			n := 0
			var closest []string
			for _, sub := range arg.([]any) {
				es := v.validate(sub, val, at)
				if len(es) == 0 {
					n++
				} else if closest == nil || len(es) < len(closest) {
					closest = es
				}
			}
			switch {
			case n == 0:
				fail("matches none of the oneOf schemas; the closest fails with: %s", strings.Join(closest, "; "))
			case n > 1:
				fail("matches %d of the oneOf schemas, want exactly 1", n)
			}
		default:
			fail("keyword %q is not supported by the test's validator", kw)
		}
	}
	return errs
}

func anyList(v any) []string {
	if s, ok := v.(string); ok {
		return []string{s}
	}
	var out []string
	for _, x := range v.([]any) {
		out = append(out, x.(string))
	}
	return out
}

func jsonEqual(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return bytes.Equal(x, y)
}

// TestOpenAPIDocumentCopy checks that OpenAPIDocument hands out a copy.
func TestOpenAPIDocumentCopy(t *testing.T) {
	a := api.OpenAPIDocument()
	a[0] = 'x'
	if b := api.OpenAPIDocument(); b[0] != '{' {
		t.Fatalf("OpenAPIDocument returned the embedded bytes themselves")
	}
}
