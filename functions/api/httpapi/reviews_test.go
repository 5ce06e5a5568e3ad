package httpapi_test

import (
	"testing"
	"time"
)

func TestReviews(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.mustUser("ann")
	e.mustUser("ben")
	p := e.mustProduct("Chair", "furniture", 4900, 10)
	q := e.mustProduct("Desk", "furniture", 9900, 10)
	ann, ben := userCaller("ann"), userCaller("ben")

	r := e.do("PUT", "/products/"+p+"/reviews/ann", ann, map[string]any{"rating": 4, "title": "Good", "body": "Sturdy"})
	want(t, r, 201)
	created := r.str("createdAt")
	r = e.do("PUT", "/products/"+p+"/reviews/ann", ann, map[string]any{"rating": 5, "title": "Great", "body": "Still sturdy"})
	want(t, r, 200)
	if r.num("rating") != 5 || r.num("version") != 2 || r.str("createdAt") != created {
		t.Errorf("got %s, want rating 5 at version 2 keeping createdAt %s", r.Body, created)
	}
	want(t, e.do("PUT", "/products/"+p+"/reviews/ben", ben, map[string]any{"rating": 2, "title": "Meh"}), 201)
	want(t, e.do("PUT", "/products/"+q+"/reviews/ann", ann, map[string]any{"rating": 3, "title": "OK"}), 201)
	// Lists are read eventually consistent (a global index only so): the
	// writes above reach them shortly after they are answered.
	time.Sleep(staleReads)

	t.Run("newest first", func(t *testing.T) {
		r := e.do("GET", "/products/"+p+"/reviews", anonymous, nil)
		want(t, r, 200)
		items := r.items()
		if len(items) != 2 || items[0]["userId"] != "ben" || items[1]["userId"] != "ann" {
			t.Errorf("got %s, want ben's then ann's", r.Body)
		}
		r = e.do("GET", "/products/"+p+"/reviews?limit=1", anonymous, nil)
		want(t, r, 200)
		r = e.do("GET", "/products/"+p+"/reviews?limit=1&cursor="+r.str("nextCursor"), anonymous, nil)
		want(t, r, 200)
		if items := r.items(); len(items) != 1 || items[0]["userId"] != "ann" {
			t.Errorf("got %s, want ann's on page 2", r.Body)
		}
		want(t, e.do("GET", "/products/nope/reviews", anonymous, nil), 404, "not-found")
	})
	t.Run("by user", func(t *testing.T) {
		r := e.do("GET", "/users/ann/reviews", ann, nil)
		want(t, r, 200)
		items := r.items()
		if len(items) != 2 || items[0]["productId"] != q || items[1]["productId"] != p {
			t.Errorf("got %s, want the desk review then the chair review", r.Body)
		}
		want(t, e.do("GET", "/users/ann/reviews", ben, nil), 403, "forbidden")
	})
	t.Run("rules", func(t *testing.T) {
		want(t, e.do("PUT", "/products/"+p+"/reviews/ann", ann, map[string]any{"rating": 6, "title": "x"}), 400, "validation")
		want(t, e.do("PUT", "/products/"+p+"/reviews/ann", ann, map[string]any{"title": "x"}), 400, "validation")
		want(t, e.do("PUT", "/products/"+p+"/reviews/ann", ben, map[string]any{"rating": 1, "title": "x"}), 403, "forbidden")
		want(t, e.do("PUT", "/products/nope/reviews/ann", ann, map[string]any{"rating": 1, "title": "x"}), 404, "not-found")
		want(t, e.do("PUT", "/products/"+p+"/reviews/zed", userCaller("zed"), map[string]any{"rating": 1, "title": "x"}), 404, "not-found")
	})
	t.Run("delete", func(t *testing.T) {
		want(t, e.do("DELETE", "/products/"+p+"/reviews/ben", ann, nil), 403, "forbidden")
		want(t, e.do("DELETE", "/products/"+p+"/reviews/ben", ben, nil), 204)
		want(t, e.do("DELETE", "/products/"+p+"/reviews/ben", ben, nil), 404, "not-found")
		want(t, e.do("DELETE", "/products/"+p+"/reviews/ann", adminCaller("root"), nil), 204)
	})
}
