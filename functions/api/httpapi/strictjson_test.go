package httpapi_test

import (
	"strings"
	"testing"
)

// TestBodiesAreReadAsWritten: a field named in another case than declared,
// a field named twice in one object, and bytes that are not UTF-8 are each a
// 400 validation that names what is wrong, and nothing is written. A field
// not declared, or of the wrong JSON type, is named by its whole path, list
// positions included, as the API's own checks name fields. Go's
// JSON decoder took "ITEMS" for "items", the last of two "quantity" fields,
// and U+FFFD for bytes that are not UTF-8.
func TestBodiesAreReadAsWritten(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.mustUser("kim")
	p := e.mustProduct("Bowl", "kitchen", 900, 10)
	kim := userCaller("kim")
	for _, tc := range []struct {
		name, method, path, body string
		who                      caller
		want                     string
	}{
		{"a field in capitals", "POST", "/users/kim/orders", `{"ITEMS":[{"productId":"` + p + `","quantity":1}]}`, kim, `"field":"ITEMS","message":"is not a known field (field names are case-sensitive: items)"`},
		{"a nested field in capitals", "POST", "/users/kim/orders", `{"items":[{"PRODUCTID":"` + p + `","quantity":1}]}`, kim, `"field":"items[0].PRODUCTID"`},
		{"a field twice", "PUT", "/users/kim/cart/" + p, `{"quantity":5,"quantity":0}`, kim, `"field":"quantity","message":"appears twice"`},
		{"a name twice", "POST", "/products", `{"name":"X","name":"Y","description":"d","category":"kitchen","priceCents":1,"stock":1}`, adminCaller("boss"), `"field":"name","message":"appears twice"`},
		{"half a surrogate pair", "POST", "/products", `{"name":"A\ud800","description":"d","category":"kitchen","priceCents":1,"stock":1}`, adminCaller("boss"), `not valid UTF-8`},
		{"a low half first", "POST", "/products", `{"name":"A\udc00\ud800","description":"d","category":"kitchen","priceCents":1,"stock":1}`, adminCaller("boss"), `not valid UTF-8`},
		{"a fractional count", "PUT", "/users/kim/cart/" + p, `{"quantity":1.0}`, kim, `"field":"quantity","message":"must be a whole number"`},
		{"a count as text in the second line", "POST", "/users/kim/orders", `{"items":[{"productId":"` + p + `","quantity":1},{"productId":"` + p + `","quantity":"2"}]}`, kim, `"field":"items[1].quantity","message":"must be a whole number"`},
		{"an unknown field in a line", "POST", "/users/kim/orders", `{"items":[{"productId":"` + p + `","qty":1}]}`, kim, `"field":"items[0].qty","message":"is not a known field"`},
		{"an object for a list", "POST", "/users/kim/orders", `{"items":{"productId":"` + p + `"}}`, kim, `"field":"items","message":"must be a list"`},
		{"a count past int64", "PUT", "/users/kim/cart/" + p, `{"quantity":9223372036854775808}`, kim, `"field":"quantity","message":"must be a whole number"`},
		{"bytes that are not UTF-8", "POST", "/products", "{\"name\":\"A\xff\xfe\",\"description\":\"d\",\"category\":\"kitchen\",\"priceCents\":1,\"stock\":1}", adminCaller("boss"), `not valid UTF-8`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := e.do(tc.method, tc.path, tc.who, tc.body)
			want(t, r, 400, "validation")
			if !strings.Contains(r.Body, tc.want) {
				t.Errorf("got %s, want it to hold %s", r.Body, tc.want)
			}
		})
	}
	// Text that is UTF-8 is read as written: a surrogate pair is one
	// character, and an escaped backslash before "ud800" is text.
	r := e.do("POST", "/products", adminCaller("boss"), `{"name":"Grin \ud83d\ude00 \\ud800","description":"d","category":"kitchen","priceCents":1,"stock":1}`)
	want(t, r, 201)
	if got := r.str("name"); got != "Grin \U0001F600 \\ud800" {
		t.Errorf("name: got %q, want %q", got, "Grin \U0001F600 \\ud800")
	}
	// Nothing was written: no order, an empty cart.
	r = e.do("GET", "/users/kim/orders", kim, nil)
	want(t, r, 200)
	if items, _ := r.json["items"].([]any); len(items) != 0 {
		t.Errorf("orders after refused bodies: %s, want none", r.Body)
	}
	r = e.do("GET", "/users/kim/cart", kim, nil)
	want(t, r, 200)
	if lines, _ := r.json["lines"].([]any); len(lines) != 0 {
		t.Errorf("cart after refused bodies: %s, want it empty", r.Body)
	}
}

// TestCutBodiesEndTheKeyCheck: a body cut anywhere is a 400 for not being
// well-formed JSON; the check of its keys stops where it stops (it once
// looped forever on an array cut after a comma).
func TestCutBodiesEndTheKeyCheck(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.mustUser("lee")
	body := `{"items":[{"productId":"01M8D04NXHD4KSZX62ZZJHJNGC","quantity":1},{"productId":"01M8D04NXHD4KSZX62ZZJHJNGD","quantity":2}]}`
	for i := 1; i < len(body); i++ {
		r := e.do("POST", "/users/lee/orders", userCaller("lee"), body[:i])
		want(t, r, 400, "validation")
	}
}
