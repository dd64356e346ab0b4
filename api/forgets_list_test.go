package api_test

import (
	"fmt"
	"net/url"
	"testing"
)

// TestListForgetsPages walks GET /v1/forgets a page at a time: every forget
// once, newest first, the counts on every page, no next on the last page;
// a bad limit or cursor is 400 invalid_request, a bad state 400
// invalid_state.
func TestListForgetsPages(t *testing.T) {
	e := newEnv(t, 0)
	var made []string
	for i := range 5 {
		r := e.do("POST", "/v1/forget", fmt.Sprintf(`{"subject":"subject-%d@example.com"}`, i))
		if r.status != 202 {
			t.Fatalf("forget: %d %v", r.status, r.body)
		}
		made = append([]string{str(r, "forget")}, made...) // newest first
	}
	var walked []string
	path := "/v1/forgets?limit=2"
	for pages := 1; ; pages++ {
		r := e.do("GET", path, "")
		if r.status != 200 {
			t.Fatalf("%s: %d %v", path, r.status, r.body)
		}
		fs, _ := r.body["forgets"].([]any)
		if len(fs) > 2 {
			t.Fatalf("a page of %d with limit=2", len(fs))
		}
		for _, f := range fs {
			walked = append(walked, f.(map[string]any)["forget"].(string))
		}
		counts, _ := r.body["counts"].(map[string]any)
		if counts["committed"] != float64(5) || len(counts) != 6 {
			t.Errorf("counts %v, want 5 committed and the six states", counts)
		}
		next, ok := r.body["next"].(string)
		if !ok {
			if pages != 3 {
				t.Errorf("%d pages of 2 for 5 forgets", pages)
			}
			break
		}
		if pages > 3 {
			t.Fatal("the pages do not end")
		}
		path = "/v1/forgets?limit=2&cursor=" + url.QueryEscape(next)
	}
	if fmt.Sprint(walked) != fmt.Sprint(made) {
		t.Errorf("walked %v, want %v", walked, made)
	}
	for _, c := range []struct{ query, code string }{
		{"limit=0", "invalid_request"}, {"limit=1001", "invalid_request"}, {"limit=02", "invalid_request"}, {"limit=x", "invalid_request"},
		{"cursor=abc", "invalid_request"}, {"cursor=" + url.QueryEscape("AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="), "invalid_request"},
		{"state=gone", "invalid_state"},
	} {
		if r := e.do("GET", "/v1/forgets?"+c.query, ""); r.status != 400 || str(r, "code") != c.code {
			t.Errorf("?%s: %d %v, want 400 %s", c.query, r.status, r.body, c.code)
		}
	}
}
