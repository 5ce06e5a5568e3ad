package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/shopstream/shopstream/infra/local/endpoints"
	"github.com/shopstream/shopstream/infra/local/stacktest"
	"github.com/shopstream/shopstream/infra/local/system"
)

// TestSeedTwiceAddsNothing: `make seed` creates the demo products and users
// and returns once search finds every product; run again, it finds every
// one, creates nothing and succeeds.
func TestSeedTwiceAddsNothing(t *testing.T) {
	prefix := stacktest.OwnPrefix(t)
	sys, err := system.Start(context.Background(), system.Config{
		Stack: endpoints.Config{
			DynamoDBUpstream: stacktest.Stack(t).Upstream(),
			TTLSweepInterval: time.Hour,
			SweepTables:      func(name string) bool { return strings.HasPrefix(name, prefix) },
		},
		TablePrefix: prefix,
	})
	if err != nil {
		t.Fatalf("start system: %v", err)
	}
	t.Cleanup(func() {
		if err := sys.Close(); err != nil {
			t.Errorf("close system: %v", err)
		}
	})
	u, err := url.Parse(sys.APIURL)
	if err != nil {
		t.Fatal(err)
	}
	getenv := func(k string) string {
		if k == "API_PORT" {
			return u.Port()
		}
		return ""
	}
	seed := func() string {
		t.Helper()
		var out bytes.Buffer
		if err := run(context.Background(), getenv, &out); err != nil {
			t.Fatalf("seed: %v\n%s", err, out.String())
		}
		return out.String()
	}
	if out := seed(); strings.Count(out, ": created") != len(products)+len(users) || !strings.Contains(out, "search: finds every demo product") {
		t.Fatalf("first seed: got\n%s\nwant %d products and %d users created, and search finding the products", out, len(products), len(users))
	}
	// Right after it, a search finds a demo product.
	resp, err := http.Get(sys.APIURL + "/search?q=" + url.QueryEscape("Trail Backpack"))
	if err != nil {
		t.Fatal(err)
	}
	var found struct{ Items []struct{ Name string } }
	err = json.NewDecoder(resp.Body).Decode(&found)
	resp.Body.Close()
	if err != nil || len(found.Items) == 0 || found.Items[0].Name != "Trail Backpack" {
		t.Fatalf("search right after the seed: got %+v, %v; want Trail Backpack first", found, err)
	}
	out := seed()
	if strings.Contains(out, "created") || strings.Count(out, ": already there") != len(products)+len(users) {
		t.Errorf("second seed: got\n%s\nwant every product and user already there", out)
	}

	// The catalog holds each demo product once.
	for _, category := range []string{"kitchen", "outdoor", "home"} {
		resp, err := http.Get(sys.APIURL + "/products?limit=100&category=" + category)
		if err != nil {
			t.Fatal(err)
		}
		var page struct{ Items []struct{ Name string } }
		err = json.NewDecoder(resp.Body).Decode(&page)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		want := 0
		for _, p := range products {
			if p.Category == category {
				want++
			}
		}
		seen := map[string]int{}
		for _, it := range page.Items {
			seen[it.Name]++
		}
		if len(page.Items) != want || len(seen) != want {
			t.Errorf("category %s: got %v, want %d products, each once", category, seen, want)
		}
	}
}
