package httpapi_test

import (
	"net/url"
	"strings"
	"testing"
)

// TestTextThatDisplaysOtherThanItReadsIsRefused: names, titles and
// categories hold one line without control characters; descriptions and
// review bodies may hold lines and tabs; none holds a bidirectional
// override or isolate, which shows "invoice\u202Egpj.exe" as "invoiceexe.jpg".
// Each is a 400 naming the field, and nothing is written.
func TestTextThatDisplaysOtherThanItReadsIsRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	admin := adminCaller("root")
	product := func(over map[string]any) map[string]any {
		p := map[string]any{"name": "Kettle", "description": "Boils water", "category": "kitchen", "priceCents": 2999, "stock": 5}
		for k, v := range over {
			p[k] = v
		}
		return p
	}
	for _, tc := range []struct {
		field string
		value string
	}{
		{"name", "Kettle\u202Egpj.exe"},
		{"name", "Kettle\nfree"},
		{"name", "Kettle\x00"},
		{"category", "kit\u2066chen"},
		{"category", "kit\x1bchen"},
		{"name", "Kettle\u2028free"},
		{"description", "Boils \u202Ewater"},
		{"description", "Boils\x07water"},
	} {
		r := e.do("POST", "/products", admin, product(map[string]any{tc.field: tc.value}))
		want(t, r, 400, "validation")
		if !hasFieldError(r, tc.field) {
			t.Errorf("%s %q: errors %v, want one naming %s", tc.field, tc.value, r.json["errors"], tc.field)
		}
	}
	// A category stored by an earlier release, whose rules were looser,
	// can still be listed.
	want(t, e.do("GET", "/products?category=kit%E2%81%A6chen", anonymous, nil), 200)
	r := e.do("POST", "/products", admin, product(map[string]any{"description": "Boils water.\n\tFast.", "name": "קומקום"}))
	want(t, r, 201)
	id := r.str("productId")
	want(t, e.do("PATCH", "/products/"+id, admin, map[string]any{"name": "K\u202Ee"}), 400, "validation")

	u := userCaller("writer")
	want(t, e.do("POST", "/users", u, map[string]any{"name": "Wri\u202Eter"}), 400, "validation")
	want(t, e.do("POST", "/users", u, map[string]any{"name": "Writer"}), 201)
	want(t, e.do("PUT", "/products/"+id+"/reviews/writer", u, map[string]any{"rating": 5, "title": "Gr\u202Eeat", "body": "ok"}), 400, "validation")
	want(t, e.do("PUT", "/products/"+id+"/reviews/writer", u, map[string]any{"rating": 5, "title": "Great", "body": "o\x00k"}), 400, "validation")
	want(t, e.do("PUT", "/products/"+id+"/reviews/writer", u, map[string]any{"rating": 5, "title": "Great", "body": "Two\nlines"}), 201)
}

// hasFieldError says whether a validation problem names field.
func hasFieldError(r response, field string) bool {
	errs, _ := r.json["errors"].([]any)
	for _, e := range errs {
		if m, ok := e.(map[string]any); ok && m["field"] == field {
			return true
		}
	}
	return false
}

// TestCategoryFilterSaysWhatIsWrong: a ?category= that no product may hold
// is a 400 that says why, the same on the category list and on search; a
// category is at most 100 bytes of UTF-8 (51 × "ß" is 102), whatever its
// characters. The list's answer said "is required" of a category given,
// and search's "is not a category".
func TestCategoryFilterSaysWhatIsWrong(t *testing.T) {
	e := newEnv(t)
	long := url.QueryEscape(strings.Repeat("ß", 51))
	for _, path := range []string{"/products?category=" + long, "/search?q=pan&category=" + long} {
		r := e.do("GET", path, anonymous, nil)
		want(t, r, 400, "validation")
		if !strings.Contains(r.Body, `"field":"category","message":"is longer than 100 bytes"`) {
			t.Errorf("GET %s: %s, want the category named as longer than 100 bytes", path, r.Body)
		}
	}
	r := e.do("GET", "/products", anonymous, nil)
	want(t, r, 400, "validation")
	if !strings.Contains(r.Body, `"field":"category","message":"is required`) {
		t.Errorf("GET /products: %s, want the category named as required", r.Body)
	}
}
