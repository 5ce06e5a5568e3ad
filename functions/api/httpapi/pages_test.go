package httpapi_test

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shopstream/shopstream/functions/api/httpapi"
	"github.com/shopstream/shopstream/functions/api/store"
	"github.com/shopstream/shopstream/shared/reviews"
)

// TestFullLastPageHasNoCursor: on every list, a last page that is exactly
// full carries no nextCursor (DynamoDB's LastEvaluatedKey at Limit used to
// lead to an empty page), and walking the pages yields every item once.
func TestFullLastPageHasNoCursor(t *testing.T) {
	t.Parallel()
	walkEveryList(t, newEnv(t), map[string]int{"2": 2, "4": 1})
}

// TestPagesCutToTheBudgetContinue: with a page budget that one item
// exceeds, every list answers one item a page, and its cursor continues
// after it, the merged open-orders list included.
func TestPagesCutToTheBudgetContinue(t *testing.T) {
	t.Parallel()
	walkEveryList(t, newEnvWith(t, nil, func(d *httpapi.Deps) { d.PageBudget = 1 }), map[string]int{"2": 4, "4": 4})
}

// walkEveryList walks every list of 4 items at limits 2 and 4, checking
// that each item is seen once and the number of pages each limit takes.
func walkEveryList(t *testing.T, e *env, wantPages map[string]int) {
	for _, u := range []string{"fay", "gus", "hal", "ina"} {
		e.mustUser(u)
	}
	fay, admin := userCaller("fay"), adminCaller("root")
	var ps []string
	for _, n := range []string{"A", "B", "C", "D"} {
		ps = append(ps, e.mustProduct("Thing "+n, "fullpage", 100, 100))
	}
	for _, u := range []string{"fay", "gus", "hal", "ina"} {
		want(t, e.do("PUT", "/products/"+ps[0]+"/reviews/"+u, userCaller(u), map[string]any{"rating": 4, "title": "ok"}), 201)
	}
	for i, p := range ps {
		if i > 0 { // fay reviewed ps[0] above
			want(t, e.do("PUT", "/products/"+p+"/reviews/fay", fay, map[string]any{"rating": 3, "title": "ok"}), 201)
		}
		e.mustOrder("fay", p, 1)
	}
	// Lists are read eventually consistent (a global index only so): the
	// writes above reach them shortly after they are answered.
	time.Sleep(staleReads)
	for _, tc := range []struct {
		name, target string
		who          caller
	}{
		{"products by category", "/products?category=fullpage", anonymous},
		{"product reviews", "/products/" + ps[0] + "/reviews", anonymous},
		{"user reviews", "/users/fay/reviews", fay},
		{"user orders", "/users/fay/orders", fay},
		{"user orders by status", "/users/fay/orders?status=PLACED", fay},
		{"open orders", "/orders?status=PLACED", admin},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, limit := range []string{"2", "4"} {
				seen := map[string]bool{}
				target := tc.target + sep(tc.target) + "limit=" + limit
				pages := 0
				for {
					r := e.do("GET", target, tc.who, nil)
					want(t, r, 200)
					pages++
					items := r.items()
					if len(items) == 0 {
						t.Fatalf("limit %s: page %d is empty: %s", limit, pages, r.Body)
					}
					for _, it := range items {
						seen[itemKey(it)] = true
					}
					c := r.str("nextCursor")
					if c == "" {
						break
					}
					target = tc.target + sep(tc.target) + "limit=" + limit + "&cursor=" + url.QueryEscape(c)
				}
				if len(seen) != 4 {
					t.Errorf("limit %s: got %d distinct items, want 4", limit, len(seen))
				}
				if pages != wantPages[limit] {
					t.Errorf("limit %s: got %d pages, want %d", limit, pages, wantPages[limit])
				}
			}
		})
	}
}

func sep(target string) string {
	for _, c := range target {
		if c == '?' {
			return "&"
		}
	}
	return "?"
}

func itemKey(it map[string]any) string {
	var k string
	for _, f := range []string{"productId", "userId", "orderId"} {
		if v, ok := it[f].(string); ok {
			k += v + "/"
		}
	}
	return k
}

// TestCursorBindsEscapedFilters: a cursor is bound to a canonical encoding of
// the filters, so a filter value that spells other filters once unescaped is
// another filter set ("category=kitchen&z=1" is not "category=kitchen%26z%3D1").
func TestCursorBindsEscapedFilters(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for range 3 {
		e.mustProduct("Spoon", "kitchen", 100, 1)
	}
	// Lists are read eventually consistent (a global index only so): the
	// writes above reach them shortly after they are answered.
	time.Sleep(staleReads)
	r := e.do("GET", "/products?category=kitchen&z=1&limit=1", anonymous, nil)
	want(t, r, 200)
	c := url.QueryEscape(r.str("nextCursor"))
	if c == "" {
		t.Fatal("no cursor")
	}
	want(t, e.do("GET", "/products?category=kitchen&z=1&limit=1&cursor="+c, anonymous, nil), 200)
	want(t, e.do("GET", "/products?z=1&category=kitchen&limit=1&cursor="+c, anonymous, nil), 200)
	want(t, e.do("GET", "/products?category=kitchen%26z%3D1&limit=1&cursor="+c, anonymous, nil), 400, "validation")
	want(t, e.do("GET", "/products?category=kitchen&z=1%26a%3Db&limit=1&cursor="+c, anonymous, nil), 400, "validation")
}

// lambdaPayloadLimit is Lambda's limit on a synchronous response, the JSON
// the runtime sends (Function.ResponseSizeTooLarge names 6291556 bytes).
const lambdaPayloadLimit = 6291556

// TestLargestPagesFitLambdasPayload: 100 reviews of the longest title and
// body, of characters JSON escapes twice over (once in the API's body, again
// in the runtime's response), make a page that Lambda would refuse to return
// (API Gateway then answers 500). The page is cut short instead, and walking
// the pages still yields every review once.
func TestLargestPagesFitLambdasPayload(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	p := e.mustProduct("Much reviewed", "bulky", 100, 1)
	title, body := strings.Repeat("<", reviews.MaxTitleLen), strings.Repeat("<", reviews.MaxBodyLen)
	const n = store.MaxLimit
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	for i := range n {
		u := fmt.Sprintf("big%03d", i)
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			e.mustUser(u)
			want(t, e.do("PUT", "/products/"+p+"/reviews/"+u, userCaller(u), map[string]any{"rating": 4, "title": title, "body": body}), 201)
		})
	}
	wg.Wait()
	// Lists are read eventually consistent (a global index only so): the
	// writes above reach them shortly after they are answered.
	time.Sleep(staleReads)
	seen := map[string]int{}
	target := "/products/" + p + "/reviews?limit=100"
	pages := 0
	for {
		r := e.do("GET", target, anonymous, nil)
		want(t, r, 200)
		pages++
		payload, err := json.Marshal(r.APIGatewayV2HTTPResponse)
		if err != nil {
			t.Fatal(err)
		}
		if len(payload) > lambdaPayloadLimit {
			t.Fatalf("page %d: the response is %d bytes as Lambda returns it, over its %d", pages, len(payload), lambdaPayloadLimit)
		}
		for _, it := range r.items() {
			seen[itemKey(it)]++
		}
		t.Logf("page %d: %d reviews, %d bytes as Lambda returns it", pages, len(r.items()), len(payload))
		c := r.str("nextCursor")
		if c == "" {
			break
		}
		target = "/products/" + p + "/reviews?limit=100&cursor=" + url.QueryEscape(c)
	}
	if len(seen) != n {
		t.Errorf("got %d distinct reviews over %d pages, want %d", len(seen), pages, n)
	}
	for k, c := range seen {
		if c != 1 {
			t.Errorf("review %s seen %d times", k, c)
		}
	}
	if pages < 2 {
		t.Errorf("one page of %d reviews: the case does not reach the limit", len(seen))
	}
}
