package main

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/shopstream/shopstream/infra/local/apigw"
)

// TestSeededSkipsAProductTheListStillShows: a category's list is a global
// index, and can still show a product deleted a moment before. Such a
// product is not "already there" (its page says 404), so seed creates it
// again rather than wait a minute for search to find it.
func TestSeededSkipsAProductTheListStillShows(t *testing.T) {
	gone := products[0]
	idOf := func(name string) string { return "id-" + strings.ReplaceAll(name, " ", "-") }
	call := func(method, path string, _ *apigw.Claims, _ any) (int, []byte, error) {
		u, err := url.Parse(path)
		if err != nil || method != "GET" {
			t.Fatalf("unexpected %s %s", method, path)
		}
		switch {
		case u.Path == "/products":
			type item struct {
				ProductID string `json:"productId"`
				Name      string `json:"name"`
			}
			var page struct {
				Items []item `json:"items"`
			}
			for _, p := range products {
				if p.Category == u.Query().Get("category") {
					page.Items = append(page.Items, item{idOf(p.Name), p.Name})
				}
			}
			b, _ := json.Marshal(page)
			return http.StatusOK, b, nil
		case u.Path == "/products/"+idOf(gone.Name):
			return http.StatusNotFound, []byte(`{"type":"not-found"}`), nil
		case strings.HasPrefix(u.Path, "/products/"):
			return http.StatusOK, []byte(`{}`), nil
		}
		t.Fatalf("unexpected %s %s", method, path)
		return 0, nil, nil
	}
	existing, err := seeded(context.Background(), call)
	if err != nil {
		t.Fatal(err)
	}
	if id, ok := existing[gone.Category][gone.Name]; ok {
		t.Errorf("%s (deleted, still in its category's list) counted as there: %s", gone.Name, id)
	}
	for _, p := range products[1:] {
		if existing[p.Category][p.Name] != idOf(p.Name) {
			t.Errorf("%s: %q, want %q", p.Name, existing[p.Category][p.Name], idOf(p.Name))
		}
	}
}

// TestSeededStopsOnAnUnreadableProduct: a page that answers neither 200 nor
// 404 ends the run, naming the product.
func TestSeededStopsOnAnUnreadableProduct(t *testing.T) {
	call := func(method, path string, _ *apigw.Claims, _ any) (int, []byte, error) {
		u, _ := url.Parse(path)
		if u.Path == "/products" {
			var page struct {
				Items []map[string]string `json:"items"`
			}
			for _, p := range products {
				if p.Category == u.Query().Get("category") {
					page.Items = append(page.Items, map[string]string{"productId": "id", "name": p.Name})
				}
			}
			b, _ := json.Marshal(page)
			return http.StatusOK, b, nil
		}
		return http.StatusServiceUnavailable, []byte(`{"type":"unavailable"}`), nil
	}
	_, err := seeded(context.Background(), call)
	if err == nil || !strings.Contains(err.Error(), "503") {
		t.Fatalf("err = %v, want one naming the 503", err)
	}
}

// TestSeededKeepsAProductWhosePageLags: a page read eventually consistent
// can miss a product created a moment before; read again after indexLag, it
// finds it, and the product stays "already there" (not created twice).
func TestSeededKeepsAProductWhosePageLags(t *testing.T) {
	lagging := products[0]
	reads := 0
	call := func(method, path string, _ *apigw.Claims, _ any) (int, []byte, error) {
		u, _ := url.Parse(path)
		switch {
		case u.Path == "/products":
			var page struct {
				Items []map[string]string `json:"items"`
			}
			for _, p := range products {
				if p.Category == u.Query().Get("category") {
					page.Items = append(page.Items, map[string]string{"productId": "id-" + p.Name, "name": p.Name})
				}
			}
			b, _ := json.Marshal(page)
			return http.StatusOK, b, nil
		case u.Path == "/products/id-"+lagging.Name:
			reads++
			if reads == 1 {
				return http.StatusNotFound, []byte(`{"type":"not-found"}`), nil
			}
		}
		return http.StatusOK, []byte(`{}`), nil
	}
	existing, err := seeded(context.Background(), call)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := existing[lagging.Category][lagging.Name]; !ok || reads != 2 {
		t.Errorf("%s: there %v after %d reads of its page, want there after 2", lagging.Name, ok, reads)
	}
}
