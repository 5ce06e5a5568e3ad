// Package productsearch is the products search index's one room: its name,
// the mapping that creates it, the document it holds for a product (written
// by the stream indexer and by the operators' reindex), and the query side
// (docs/contract.md#5-search): full-text search over name and description,
// optionally within a category, best match first, against OpenSearch's
// _search API.
package productsearch

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/shopstream/shopstream/shared/errcode"
	"github.com/shopstream/shopstream/shared/products"
)

// Index is the name of the products index.
const Index = "products"

// DeleteMemory is how long the index remembers a delete (index.gc_deletes
// in Mapping): a write of a version older than a delete it has forgotten
// brings the document back.
const DeleteMemory = 25 * time.Hour

// Mapping is the body that creates the index: text for what people search,
// keyword for what they filter on, and deletes remembered for 25 h
// (index.gc_deletes). OpenSearch's default of 60 s is shorter than a stream
// record can come late (records live 24 h, and so long the mapping retries):
// a write redelivered after its product's tombstone is gone would resurrect it.
const Mapping = `{"settings":{"index":{"gc_deletes":"25h"}},"mappings":{"properties":{
 "productId":{"type":"keyword"},"name":{"type":"text"},"description":{"type":"text"},
 "category":{"type":"keyword"},"priceCents":{"type":"long"},"ratingAverage":{"type":"double"},
 "reviewCount":{"type":"long"},"unitsSold":{"type":"long"},"version":{"type":"long"}}}}`

// MaxWindow is how deep a search may page (OpenSearch's default
// index.max_result_window).
const MaxWindow = 10000

// Document is a product as the index holds it.
type Document struct {
	ProductID     string   `json:"productId"`
	Name          string   `json:"name"`
	Description   string   `json:"description"`
	Category      string   `json:"category"`
	PriceCents    int64    `json:"priceCents"`
	RatingAverage *float64 `json:"ratingAverage"`
	ReviewCount   int64    `json:"reviewCount"`
	UnitsSold     int64    `json:"unitsSold"`
	Version       int64    `json:"version"`
}

// DocumentOf is the product as the index holds it, its rating average
// derived as the API derives it.
func DocumentOf(p products.Product) Document {
	p.Derive()
	return Document{ProductID: p.ProductID, Name: p.Name, Description: p.Description, Category: p.Category,
		PriceCents: p.PriceCents, RatingAverage: p.RatingAverage, ReviewCount: p.ReviewCount, UnitsSold: p.UnitsSold, Version: p.Version}
}

// Query is one search. Its hits come best match first, and hits of one
// score by product id, so that a hit's place is its own: After, the last
// hit of the page before, takes the hits after it (search_after), and From
// is ignored then.
type Query struct {
	Text     string
	Category string
	From     int
	Size     int
	After    *Place
	// Shown are the ids of hits shown before After on its page, the
	// latest last (at most ShownKept): the page goes on after the latest
	// of them still there when After's hit is gone.
	Shown []string
	// Next is the id of the hit that came right after After when its page
	// was read (its page asked for one hit more): with After and Shown
	// all gone, the page starts at Next, when it is still there.
	Next string
}

// ShownKept is how many hits before its last a page names for the next.
const ShownKept = 3

// Place is where a hit sorts: its score and its product id.
type Place struct {
	Score     float64 `json:"score"`
	ProductID string  `json:"id"`
}

// Result is one page of hits and the total number of matches.
type Result struct {
	Total int
	Hits  []Document
	// Places are the hits' places, one a hit: nil for a hit whose sort
	// values name no score and product id (a document without a
	// productId), after which a page cannot go on by place.
	Places []*Place
}

// Client searches the index at URL (e.g. http://127.0.0.1:9200).
type Client struct {
	URL   string
	Index string
	HTTP  *http.Client
	// Sign, when set, signs each request (SigV4 for Amazon OpenSearch Service).
	Sign func(r *http.Request, body []byte) error
}

// Search runs q. Codes: Unavailable (the search service failed).
//
// A score is relative to the index as it is: every document indexed or
// deleted moves the scores of all the others (BM25's term and length
// statistics), so the score a page ended on says little a refresh later.
// A page after q.After therefore first reads that hit's score now (the same
// query, filtered to its product id) and goes on after it: a product indexed
// or deleted between two pages neither repeats a hit nor skips one, unless
// it changes the order of the hits themselves. When that hit is gone, the
// page goes on after the latest of q.Shown still there; when they are all
// gone, it starts at q.Next, the hit that followed them; and when that is
// gone too, it goes on after the score the last one had.
func (c *Client) Search(ctx context.Context, q Query) (Result, error) {
	query := func(only []string) map[string]any {
		must := map[string]any{"multi_match": map[string]any{"query": q.Text, "fields": []string{"name^3", "description", "category"}}}
		boolQ := map[string]any{"must": []any{must}}
		var filter []any
		if q.Category != "" {
			filter = append(filter, map[string]any{"term": map[string]any{"category": q.Category}})
		}
		if len(only) > 0 {
			filter = append(filter, map[string]any{"terms": map[string]any{"productId": only}})
		}
		if filter != nil {
			boolQ["filter"] = filter
		}
		return map[string]any{"bool": boolQ}
	}
	req := map[string]any{
		"size":  q.Size,
		"query": query(nil),
		"sort":  []any{map[string]any{"_score": "desc"}, map[string]any{"productId": "asc"}},
	}
	// Every page of one search asks the same copies of the shards
	// (preference): the copies of a shard score alike only when they hold
	// the same deleted documents, so another copy could place the hits
	// another way between two pages ("Search shard routing", OpenSearch
	// documentation, custom preference strings).
	pref := preference(q)
	var first *Result // the page's first hit, when it starts at q.Next
	if after := q.After; after != nil {
		// The page's last hit as it ranks now; if it is gone, the latest
		// of the hits shown before it that is not (q.Shown); if they are
		// all gone, the hit that came next, which then opens the page.
		ids := append(slices.Clone(q.Shown), after.ProductID)
		if q.Next != "" {
			ids = append(ids, q.Next)
		}
		now, err := c.run(ctx, pref, map[string]any{"size": len(ids), "query": query(ids), "sort": req["sort"]})
		if err != nil {
			return Result{}, err
		}
		found := map[string]int{}
		for i, p := range now.Places {
			if p != nil {
				found[p.ProductID] = i
			}
		}
		anchored := false
		for i := len(q.Shown); i >= 0; i-- { // After, then Shown from the latest
			if k, ok := found[ids[i]]; ok {
				after, anchored = now.Places[k], true
				break
			}
		}
		if k, ok := found[q.Next]; !anchored && ok && q.Next != "" && q.Size > 0 {
			after = now.Places[k]
			first = &Result{Hits: now.Hits[k : k+1], Places: now.Places[k : k+1]}
			req["size"] = q.Size - 1
		}
		req["search_after"] = []any{after.Score, after.ProductID}
	} else {
		req["from"] = q.From
	}
	res, err := c.run(ctx, pref, req)
	if err != nil || first == nil {
		return res, err
	}
	res.Hits = append(first.Hits, res.Hits...)
	res.Places = append(first.Places, res.Places...)
	return res, nil
}

// preference names the pages of one search: its text and its category.
func preference(q Query) string {
	h := fnv.New64a()
	h.Write([]byte(q.Text + "\x00" + q.Category))
	return "search-" + strconv.FormatUint(h.Sum64(), 36)
}

// run sends one search and reads its answer.
func (c *Client) run(ctx context.Context, pref string, req map[string]any) (Result, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return Result{}, fmt.Errorf("search: %w", err)
	}
	index := c.Index
	if index == "" {
		index = Index
	}
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimSuffix(c.URL, "/")+"/"+index+"/_search?preference="+url.QueryEscape(pref), bytes.NewReader(body))
	if err != nil {
		return Result{}, fmt.Errorf("search: %w", err)
	}
	hr.Header.Set("Content-Type", "application/json")
	if c.Sign != nil {
		if err := c.Sign(hr, body); err != nil {
			return Result{}, fmt.Errorf("search: sign: %w", err)
		}
	}
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(hr)
	if err != nil {
		return Result{}, unavailable(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return Result{}, unavailable(err)
	}
	switch {
	case resp.StatusCode == http.StatusNotFound:
		return Result{Hits: []Document{}}, nil // no index yet: nothing indexed
	case resp.StatusCode != http.StatusOK:
		return Result{}, unavailable(fmt.Errorf("search: status %d: %.200s", resp.StatusCode, raw))
	}
	var out struct {
		Hits struct {
			Total struct {
				Value int `json:"value"`
			} `json:"total"`
			Hits []struct {
				ID     string   `json:"_id"`
				Source Document `json:"_source"`
				Sort   []any    `json:"sort"`
			} `json:"hits"`
		} `json:"hits"`
	}
	if err := json.Unmarshal(raw, &out); err != nil {
		return Result{}, fmt.Errorf("search: decode response: %w", err)
	}
	res := Result{Total: out.Hits.Total.Value, Hits: make([]Document, 0, len(out.Hits.Hits)), Places: make([]*Place, 0, len(out.Hits.Hits))}
	for _, h := range out.Hits.Hits {
		d := h.Source
		if d.ProductID == "" {
			d.ProductID = h.ID
		}
		res.Hits = append(res.Hits, d)
		res.Places = append(res.Places, placeOf(h.Sort))
	}
	return res, nil
}

// placeOf reads a hit's sort values: its score and its product id.
func placeOf(sort []any) *Place {
	if len(sort) != 2 {
		return nil
	}
	score, isNumber := sort[0].(float64)
	id, isString := sort[1].(string)
	if !isNumber || !isString || id == "" {
		return nil
	}
	return &Place{Score: score, ProductID: id}
}

func unavailable(err error) error {
	return &errcode.Error{Code: errcode.Unavailable, Message: "search is unavailable", Err: err}
}

// Signed reports whether requests to endpoint are SigV4-signed, as Amazon
// OpenSearch Service requires: as flag (SEARCH_SIGV4) says when it is set,
// else when endpoint is an AWS one (*.amazonaws.com). The local search
// service takes plain HTTP.
func Signed(endpoint, flag string) (bool, error) {
	u, err := url.Parse(endpoint)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return false, fmt.Errorf("SEARCH_URL %q is not an http(s) URL", endpoint)
	}
	if flag == "" {
		return strings.HasSuffix(u.Hostname(), ".amazonaws.com"), nil
	}
	sign, err := strconv.ParseBool(flag)
	if err != nil {
		return false, fmt.Errorf("SEARCH_SIGV4 %q is not a boolean", flag)
	}
	return sign, nil
}
