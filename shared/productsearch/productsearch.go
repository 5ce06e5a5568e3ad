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
	"io"
	"net/http"
	"net/url"
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

// Query is one search.
type Query struct {
	Text     string
	Category string
	From     int
	Size     int
}

// Result is one page of hits and the total number of matches.
type Result struct {
	Total int
	Hits  []Document
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
func (c *Client) Search(ctx context.Context, q Query) (Result, error) {
	must := map[string]any{"multi_match": map[string]any{"query": q.Text, "fields": []string{"name^3", "description", "category"}}}
	boolQ := map[string]any{"must": []any{must}}
	if q.Category != "" {
		boolQ["filter"] = []any{map[string]any{"term": map[string]any{"category": q.Category}}}
	}
	body, err := json.Marshal(map[string]any{
		"from": q.From, "size": q.Size,
		"query": map[string]any{"bool": boolQ},
	})
	if err != nil {
		return Result{}, fmt.Errorf("search: %w", err)
	}
	index := c.Index
	if index == "" {
		index = Index
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimSuffix(c.URL, "/")+"/"+index+"/_search", bytes.NewReader(body))
	if err != nil {
		return Result{}, fmt.Errorf("search: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	if c.Sign != nil {
		if err := c.Sign(req, body); err != nil {
			return Result{}, fmt.Errorf("search: sign: %w", err)
		}
	}
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
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
			} `json:"hits"`
		} `json:"hits"`
	}
	if err := json.Unmarshal(raw, &out); err != nil {
		return Result{}, fmt.Errorf("search: decode response: %w", err)
	}
	res := Result{Total: out.Hits.Total.Value, Hits: make([]Document, 0, len(out.Hits.Hits))}
	for _, h := range out.Hits.Hits {
		d := h.Source
		if d.ProductID == "" {
			d.ProductID = h.ID
		}
		res.Hits = append(res.Hits, d)
	}
	return res, nil
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
