// Command seed loads demo products and users into a running local system
// (`make run`) through its HTTP API, as a client would.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/shopstream/shopstream/infra/local/apigw"
	"github.com/shopstream/shopstream/infra/local/system"
)

type product struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	Category    string `json:"category"`
	PriceCents  int    `json:"priceCents"`
	Stock       int    `json:"stock"`
}

var products = []product{
	{"Copper Kettle", "A copper kettle that whistles when the water boils", "kitchen", 4900, 40},
	{"Cast Iron Pan", "A 26 cm cast iron pan, pre-seasoned", "kitchen", 3900, 25},
	{"Chef's Knife", "A 20 cm chef's knife in carbon steel", "kitchen", 8900, 15},
	{"Linen Apron", "A washed linen apron with two pockets", "kitchen", 2900, 60},
	{"Trail Backpack", "A 28 litre backpack for day hikes", "outdoor", 7900, 30},
	{"Camp Stove", "A folding gas stove for two-burner camp cooking", "outdoor", 6400, 12},
	{"Wool Socks", "Merino wool hiking socks, pack of three", "outdoor", 2400, 100},
	{"Desk Lamp", "An adjustable LED desk lamp with warm light", "home", 5600, 20},
}

// users carry the email `make token SUB=<id>` claims by default, so that a
// token made for a seeded user is that user's.
var users = []struct{ ID, Email, Name string }{
	{"u1", "u1@example.com", "Ada"},
	{"u2", "u2@example.com", "Grace"},
}

func main() {
	if err := run(context.Background(), os.Getenv, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "seed:", err)
		os.Exit(1)
	}
}

// run creates the demo products and users that are not there yet: a product
// by its name in its category, a user by its id; then it waits until search
// finds every demo product. A second run creates nothing and succeeds.
func run(ctx context.Context, getenv func(string) string, out io.Writer) error {
	base := "http://127.0.0.1:" + or(getenv("API_PORT"), "3000")
	secret := []byte(or(getenv("LOCAL_JWT_SECRET"), system.DefaultJWTSecret))
	client := &http.Client{Timeout: 10 * time.Second}
	call := func(method, path string, who *apigw.Claims, body any) (int, []byte, error) {
		var rd io.Reader
		if body != nil {
			raw, err := json.Marshal(body)
			if err != nil {
				return 0, nil, err
			}
			rd = bytes.NewReader(raw)
		}
		req, err := http.NewRequestWithContext(ctx, method, base+path, rd)
		if err != nil {
			return 0, nil, err
		}
		req.Header.Set("Content-Type", "application/json")
		if who != nil {
			tok, err := apigw.TokenFor(secret, *who, time.Hour)
			if err != nil {
				return 0, nil, err
			}
			req.Header.Set("Authorization", "Bearer "+tok)
		}
		resp, err := client.Do(req)
		if err != nil {
			return 0, nil, fmt.Errorf("%s %s (is `make run` up?): %w", method, path, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b, nil
	}
	existing, err := seeded(ctx, call)
	if err != nil {
		return err
	}
	admin := &apigw.Claims{Sub: "admin", Admin: true}
	for _, p := range products {
		if id, ok := existing[p.Category][p.Name]; ok {
			fmt.Fprintf(out, "product %s: already there (%s)\n", p.Name, id)
			continue
		}
		code, body, err := call("POST", "/products", admin, p)
		if err != nil {
			return err
		}
		var created struct {
			ProductID string `json:"productId"`
		}
		if code != http.StatusCreated || json.Unmarshal(body, &created) != nil {
			return fmt.Errorf("create product %q: %d %s", p.Name, code, body)
		}
		existing[p.Category][p.Name] = created.ProductID
		fmt.Fprintf(out, "product %s: created (%s)\n", p.Name, created.ProductID)
	}
	for _, u := range users {
		who := &apigw.Claims{Sub: u.ID, Email: u.Email}
		code, body, err := call("POST", "/users", who, map[string]string{"name": u.Name})
		if err != nil {
			return err
		}
		switch code {
		case http.StatusCreated:
			fmt.Fprintf(out, "user %s: created\n", u.ID)
			continue
		case http.StatusConflict:
			// The user, or another with its email: only the first is
			// "already there".
			got, _, err := call("GET", "/users/"+u.ID, who, nil)
			if err != nil {
				return err
			}
			if got == http.StatusOK {
				fmt.Fprintf(out, "user %s: already there\n", u.ID)
				continue
			}
		}
		return fmt.Errorf("create user %s: %d %s", u.ID, code, body)
	}
	return awaitSearch(ctx, call, existing, out)
}

// searchWait bounds how long seed waits for search to find the demo
// products. The stream-indexer follows the products' stream, and a
// document shows in searches after the index's next refresh (1 s), so a
// product just created is found a few seconds later, not at once.
const searchWait = time.Minute

// awaitSearch returns once GET /search finds each demo product (ids:
// category → name → id) by its name in its category, so that a search right
// after `make seed` finds them. An answer that refuses the search (a 4xx
// other than 429) ends it at once; a failed call, a 429 or a 5xx is tried
// again until searchWait.
func awaitSearch(ctx context.Context, call caller, ids map[string]map[string]string, out io.Writer) error {
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, searchWait)
	defer cancel()
	pending := map[product]string{}
	for _, p := range products {
		pending[p] = ids[p.Category][p.Name]
	}
	last := ""
	for {
		for p, id := range pending {
			code, body, err := call("GET", "/search?limit=100&q="+url.QueryEscape(p.Name)+"&category="+url.QueryEscape(p.Category), nil, nil)
			switch {
			case ctx.Err() != nil:
			case err != nil:
				last = err.Error()
				continue
			case code >= 400 && code < 500 && code != http.StatusTooManyRequests:
				return fmt.Errorf("search for %q: %d %s", p.Name, code, body)
			case code != http.StatusOK:
				last = fmt.Sprintf("%d %s", code, body)
				continue
			}
			if ctx.Err() != nil {
				break
			}
			type hit struct {
				ProductID string `json:"productId"`
			}
			var page struct {
				Items []hit `json:"items"`
			}
			if json.Unmarshal(body, &page) == nil && slices.ContainsFunc(page.Items, func(h hit) bool { return h.ProductID == id }) {
				delete(pending, p)
			}
		}
		if len(pending) == 0 {
			fmt.Fprintf(out, "search: finds every demo product (after %s)\n", time.Since(start).Round(100*time.Millisecond))
			return nil
		}
		select {
		case <-time.After(500 * time.Millisecond):
			continue
		case <-ctx.Done():
		}
		var missing []string
		for p := range pending {
			missing = append(missing, p.Name)
		}
		slices.Sort(missing)
		msg := fmt.Sprintf("search does not find %s after %s: is the stream-indexer running (make run's log)? make reindex rebuilds the index", strings.Join(missing, ", "), time.Since(start).Round(time.Second))
		if last != "" {
			msg += "; the last failed search answered " + last
		}
		return errors.New(msg)
	}
}

// caller sends one request to the API, as who (nil: no token).
type caller func(method, path string, who *apigw.Claims, body any) (int, []byte, error)

// indexLag is how long a product's creation may take to reach its
// category's list, a global index: "within 1 second" on AWS
// (https://repost.aws/knowledge-center/dynamodb-missing-table-items-gsi).
const indexLag = time.Second

// seeded returns the demo products already there, by category and name. A
// category whose list misses one of them is read again after indexLag, so
// that a run right after another (its products not yet in the lists)
// does not create them twice.
func seeded(ctx context.Context, call caller) (map[string]map[string]string, error) {
	existing := map[string]map[string]string{} // category → name → id
	// list reads the categories given, each once, and reports whether a
	// demo product of theirs is missing.
	list := func(cats map[string]bool) (missing bool, err error) {
		for c := range cats {
			if existing[c], err = productsIn(call, c); err != nil {
				return false, err
			}
		}
		for _, p := range products {
			if _, ok := existing[p.Category][p.Name]; !ok && cats[p.Category] {
				missing = true
			}
		}
		return missing, nil
	}
	all := map[string]bool{}
	for _, p := range products {
		all[p.Category] = true
	}
	missing, err := list(all)
	if err != nil {
		return nil, err
	}
	if !missing {
		return existing, confirm(ctx, call, existing)
	}
	select {
	case <-time.After(indexLag):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	again := map[string]bool{}
	for _, p := range products {
		if _, ok := existing[p.Category][p.Name]; !ok {
			again[p.Category] = true
		}
	}
	if _, err := list(again); err != nil {
		return nil, err
	}
	return existing, confirm(ctx, call, existing)
}

// confirm drops from existing the products that are gone: a category's
// list is a global index, which can still show a product deleted a moment
// before (indexLag); the product's own page reads its table, and says 404.
// Kept, such a product would be "already there", and never found by search.
// A page read eventually consistent can miss a product created a moment
// before too, so a 404 is read again after indexLag, and only a second 404
// drops it.
func confirm(ctx context.Context, call caller, existing map[string]map[string]string) error {
	var missed []product
	for _, p := range products {
		id, ok := existing[p.Category][p.Name]
		if !ok {
			continue
		}
		there, err := productThere(call, p, id)
		if err != nil {
			return err
		}
		if !there {
			missed = append(missed, p)
		}
	}
	if len(missed) == 0 {
		return nil
	}
	select {
	case <-time.After(indexLag):
	case <-ctx.Done():
		return ctx.Err()
	}
	for _, p := range missed {
		there, err := productThere(call, p, existing[p.Category][p.Name])
		if err != nil {
			return err
		}
		if !there {
			delete(existing[p.Category], p.Name)
		}
	}
	return nil
}

// productThere reads product p's page by its id: 200 is there, 404 is not.
func productThere(call caller, p product, id string) (bool, error) {
	code, body, err := call("GET", "/products/"+url.PathEscape(id), nil, nil)
	switch {
	case err != nil:
		return false, err
	case code == http.StatusNotFound:
		return false, nil
	case code != http.StatusOK:
		return false, fmt.Errorf("read product %s (%s): %d %s", p.Name, id, code, body)
	}
	return true, nil
}

// productsIn returns the ids of a category's products by name, every page.
func productsIn(call caller, category string) (map[string]string, error) {
	names := map[string]string{}
	cursor := ""
	for {
		path := "/products?limit=100&category=" + url.QueryEscape(category)
		if cursor != "" {
			path += "&cursor=" + url.QueryEscape(cursor)
		}
		code, body, err := call("GET", path, nil, nil)
		if err != nil {
			return nil, err
		}
		var page struct {
			Items []struct {
				ProductID string `json:"productId"`
				Name      string `json:"name"`
			} `json:"items"`
			NextCursor string `json:"nextCursor"`
		}
		if code != http.StatusOK || json.Unmarshal(body, &page) != nil {
			return nil, fmt.Errorf("list products of %s: %d %s", category, code, body)
		}
		for _, it := range page.Items {
			names[it.Name] = it.ProductID
		}
		if page.NextCursor == "" {
			return names, nil
		}
		cursor = page.NextCursor
	}
}

func or(v, def string) string {
	if v == "" {
		return def
	}
	return v
}
