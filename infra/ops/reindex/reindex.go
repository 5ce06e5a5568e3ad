// Package reindex rebuilds the search index `products` from the products table
// while traffic and the stream indexer run: every product is written with its
// own version as an external version (external_gte), so a newer change the
// indexer already wrote is never overwritten, and the documents of products
// that no longer exist are deleted with a version no write of theirs can
// reach (docs/operations.md).
package reindex

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/shopstream/shopstream/infra/ops/progress"
	"github.com/shopstream/shopstream/infra/ops/scan"
	"github.com/shopstream/shopstream/shared/ddbcall"
	"github.com/shopstream/shopstream/shared/facts"
	"github.com/shopstream/shopstream/shared/products"
	"github.com/shopstream/shopstream/shared/productsearch"
)

// DeletedVersion is the external version of the delete that removes the
// document of a product that no longer exists. The product's last version is
// gone with it, so "its version + 1" (the indexer's rule) is unknown here; a
// late write of the product carries at most that last version, and product
// versions count writes, so no product ever comes near 2^62. Product ids are
// ULIDs, never reused: nothing legitimate is ever refused by it.
const DeletedVersion int64 = 1 << 62

// DB is the part of the DynamoDB client the reindex uses.
type DB interface {
	Scan(context.Context, *dynamodb.ScanInput, ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error)
	BatchGetItem(context.Context, *dynamodb.BatchGetItemInput, ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error)
	GetItem(context.Context, *dynamodb.GetItemInput, ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	UpdateItem(context.Context, *dynamodb.UpdateItemInput, ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
}

// Search sends a request to the search service (opensearch.Client does,
// signing it for Amazon OpenSearch Service when configured to).
type Search interface {
	Perform(*http.Request) (*http.Response, error)
}

// Config configures a reindex.
type Config struct {
	DB     DB
	Search Search
	// Products is the products table's physical name.
	Products string
	// Segments is the number of parallel scan segments (default 4).
	Segments int
	// BatchSize is the number of documents per _bulk request (default 500).
	BatchSize int
	Progress  *progress.Meter
}

// Report is what a reindex did.
type Report struct {
	// Indexed documents were written; Newer ones were refused because the
	// index already held a newer version (the live indexer's).
	Indexed, Newer int
	// Raised products held a version below their document's, which no
	// write of the table made (the table restored to an earlier point, a
	// document written outside the indexer): their version was raised
	// above the document's, and the document written again.
	Raised []string
	// Deleted documents belonged to products that no longer exist.
	Deleted int
	// Failed lists the documents the service refused for another reason.
	Failed []string
	// Unreadable names the products indexed with a counter taken as none
	// counted, since it holds no integer (facts.Readable), as the API and
	// the indexer show it: make audit REPAIR=1 sets it, then the indexer
	// follows.
	Unreadable []string
}

// Run rebuilds the index.
func Run(ctx context.Context, cfg Config) (Report, error) {
	if cfg.Segments <= 0 {
		cfg.Segments = 4
	}
	if cfg.BatchSize <= 0 {
		cfg.BatchSize = 500
	}
	r := &run{cfg: cfg, seen: map[string]bool{}}
	if err := r.ensureIndex(ctx); err != nil {
		return Report{}, err
	}
	err := scan.Table(ctx, cfg.DB, scan.Input{Table: cfg.Products, Segments: cfg.Segments, PageSize: int32(cfg.BatchSize), Consistent: true},
		func(items []map[string]types.AttributeValue) error { return r.index(ctx, items) })
	if err != nil {
		return r.report(), fmt.Errorf("reindex: %w", err)
	}
	// The walk for stale documents searches the index, which shows a write
	// at its next refresh, a second later by default ("Refresh Index API",
	// https://docs.opensearch.org/latest/api-reference/index-apis/refresh/):
	// refreshed first, it finds every document written before it, a late
	// write of a deleted product a moment ago included. Refreshed again
	// after, searches show the rebuilt index when the command ends.
	if err := r.refresh(ctx); err != nil {
		return r.report(), fmt.Errorf("reindex: %w", err)
	}
	if err := r.removeStale(ctx); err != nil {
		return r.report(), fmt.Errorf("reindex: %w", err)
	}
	if err := r.refresh(ctx); err != nil {
		return r.report(), fmt.Errorf("reindex: the index is rebuilt, and searches show it at its next scheduled refresh: %w", err)
	}
	return r.report(), nil
}

// refresh makes every write to the index so far searchable.
func (r *run) refresh(ctx context.Context) error {
	status, raw, err := r.call(ctx, http.MethodPost, productsearch.Index+"/_refresh", nil, "")
	if err == nil {
		var out struct{}
		err = decode(status, raw, &out)
	}
	if err != nil {
		return fmt.Errorf("refresh index %s: %w", productsearch.Index, err)
	}
	return nil
}

type run struct {
	cfg  Config
	mu   sync.Mutex
	seen map[string]bool
	rep  Report
}

func (r *run) report() Report {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.rep
	out.Failed = append([]string(nil), r.rep.Failed...)
	sort.Strings(out.Failed)
	return out
}

// call sends one request and returns the status and the answer's body; an
// error only when the request could not be made or answered.
func (r *run) call(ctx context.Context, method, path string, body []byte, contentType string) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, method, "/"+strings.TrimPrefix(path, "/"), bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := r.cfg.Search.Perform(req)
	if err != nil {
		return 0, nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return resp.StatusCode, nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	return resp.StatusCode, raw, nil
}

// decode reads an answer, or names what came back instead.
func decode(status int, raw []byte, out any) error {
	if status >= 300 {
		return fmt.Errorf("status %d: %.300s", status, raw)
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return fmt.Errorf("decode answer: %w", err)
	}
	return nil
}

// ensureIndex creates the index with its mapping (the indexer's too) when it is
// missing, and checks that an existing one can be walked by productId.
func (r *run) ensureIndex(ctx context.Context) error {
	status, raw, err := r.call(ctx, http.MethodPut, productsearch.Index, []byte(productsearch.Mapping), "application/json")
	var e struct {
		Error struct {
			Type string `json:"type"`
		} `json:"error"`
	}
	_ = json.Unmarshal(raw, &e)
	switch {
	case err != nil:
		return fmt.Errorf("create index %s: %w", productsearch.Index, err)
	case status < 300:
		r.cfg.Progress.Note("created index %s", productsearch.Index)
		return nil
	case e.Error.Type != "resource_already_exists_exception":
		return fmt.Errorf("create index %s: status %d: %.300s", productsearch.Index, status, raw)
	}
	var mapping map[string]struct {
		Mappings struct {
			Properties map[string]struct {
				Type string `json:"type"`
			} `json:"properties"`
		} `json:"mappings"`
	}
	status, raw, err = r.call(ctx, http.MethodGet, productsearch.Index+"/_mapping", nil, "")
	if err == nil {
		err = decode(status, raw, &mapping)
	}
	if err != nil {
		return fmt.Errorf("read mapping of %s: %w", productsearch.Index, err)
	}
	for name, m := range mapping {
		if t := m.Mappings.Properties["productId"].Type; t != "keyword" {
			return fmt.Errorf("index %s (%s) maps productId as %q, not keyword: it was not created from the index's mapping; drop it and run the reindex again", productsearch.Index, name, t)
		}
	}
	return nil
}

// bulkItem is one result of a _bulk request.
type bulkItem struct {
	ID     string `json:"_id"`
	Status int    `json:"status"`
	Error  *struct {
		Type   string `json:"type"`
		Reason string `json:"reason"`
	} `json:"error"`
}

// maxAttempts bounds how often a document the service answered with 429 or
// 5xx is sent again.
const maxAttempts = 5

// bulk sends actions (one per document: meta line and, for an index, the
// document) and returns the result of each, sending again those the service
// was too busy for.
func (r *run) bulk(ctx context.Context, ids []string, actions [][]byte) (map[string]bulkItem, error) {
	results := map[string]bulkItem{}
	pending := make([]int, len(ids))
	for i := range pending {
		pending[i] = i
	}
	for attempt := 1; len(pending) > 0; attempt++ {
		var body bytes.Buffer
		for _, i := range pending {
			body.Write(actions[i])
		}
		var out struct {
			Items []map[string]bulkItem `json:"items"`
		}
		status, raw, err := r.call(ctx, http.MethodPost, productsearch.Index+"/_bulk", body.Bytes(), "application/x-ndjson")
		if err == nil {
			err = decode(status, raw, &out)
		}
		if err == nil && len(out.Items) != len(pending) {
			err = fmt.Errorf("%d results for %d actions", len(out.Items), len(pending))
		}
		if err != nil {
			if attempt >= maxAttempts {
				return nil, fmt.Errorf("bulk: %w", err)
			}
			if err := ddbcall.Sleep(ctx, time.Duration(attempt)*200*time.Millisecond); err != nil {
				return nil, err
			}
			continue
		}
		var again []int
		for k, item := range out.Items {
			for _, res := range item {
				i := pending[k]
				if (res.Status == http.StatusTooManyRequests || res.Status >= 500) && attempt < maxAttempts {
					again = append(again, i)
					continue
				}
				results[ids[i]] = res
			}
		}
		pending = again
		if len(pending) > 0 {
			if err := ddbcall.Sleep(ctx, time.Duration(attempt)*200*time.Millisecond); err != nil {
				return nil, err
			}
		}
	}
	return results, nil
}

// index writes one page of products, each with its own version.
func (r *run) index(ctx context.Context, items []map[string]types.AttributeValue) error {
	var ids []string
	var sent []int64
	var actions [][]byte
	for _, item := range items {
		item, bad := facts.Readable(facts.Product, item)
		var p products.Product
		if err := attributevalue.UnmarshalMap(item, &p); err != nil || p.ProductID == "" || p.Version < 1 {
			r.mu.Lock()
			r.rep.Failed = append(r.rep.Failed, fmt.Sprintf("%s: product item without productId or version (%v)", p.ProductID, err))
			r.mu.Unlock()
			continue
		}
		if len(bad) > 0 {
			r.mu.Lock()
			for _, u := range bad {
				r.rep.Unreadable = append(r.rep.Unreadable, fmt.Sprintf("%s: %s holds %s, indexed as none counted", p.ProductID, u.Name, u.Holds))
			}
			r.mu.Unlock()
		}
		meta, _ := json.Marshal(map[string]any{"index": map[string]any{"_id": p.ProductID, "version": p.Version, "version_type": "external_gte"}})
		doc, err := json.Marshal(productsearch.DocumentOf(p))
		if err != nil {
			return fmt.Errorf("product %s: %w", p.ProductID, err)
		}
		ids = append(ids, p.ProductID)
		sent = append(sent, p.Version)
		actions = append(actions, append(append(append(meta, '\n'), doc...), '\n'))
	}
	r.mu.Lock()
	for _, id := range ids {
		r.seen[id] = true
	}
	r.mu.Unlock()
	if len(ids) == 0 {
		return nil
	}
	results, err := r.bulk(ctx, ids, actions)
	if err != nil {
		return err
	}
	// A document above its product's version: the table is behind the
	// index (a document the table never had). Raised, it is written again.
	for i, id := range ids {
		res := results[id]
		if res.Status != http.StatusConflict || res.Error == nil {
			continue
		}
		held, ok := heldVersion(res.Error.Reason)
		if !ok || held <= sent[i] {
			continue
		}
		again, raised, err := r.raise(ctx, id, held)
		if err != nil {
			return err
		}
		if raised {
			results[id] = again
		}
	}
	r.count(results, "index")
	return nil
}

// heldVersion reads the version a document holds from a version conflict's
// reason, as OpenSearch writes it ("[id]: version conflict, current version
// [7] is higher or equal to the one provided [5]").
func heldVersion(reason string) (int64, bool) {
	_, rest, ok := strings.Cut(reason, "current version [")
	if !ok {
		return 0, false
	}
	n, _, ok := strings.Cut(rest, "]")
	if !ok {
		return 0, false
	}
	v, err := strconv.ParseInt(n, 10, 64)
	return v, err == nil
}

// raise lifts product id's version above held, the version its document
// holds, when a consistent read finds the table below it, and writes the
// document at the new version: the live indexer would never reach it. The
// update is conditional on the version read (a write meanwhile is read
// again), and a version only goes up, as every writer's does. raised is
// false when the table is at or above held by now (the live indexer's
// write of it will land) or the product is gone (removeStale deletes its
// document).
func (r *run) raise(ctx context.Context, id string, held int64) (res bulkItem, raised bool, err error) {
	key := map[string]types.AttributeValue{"productId": &types.AttributeValueMemberS{Value: id}}
	for range maxAttempts {
		out, err := r.cfg.DB.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(r.cfg.Products), Key: key, ConsistentRead: aws.Bool(true)})
		if err != nil {
			return bulkItem{}, false, fmt.Errorf("read product %s: %w", id, err)
		}
		var p products.Product
		if out.Item == nil {
			return bulkItem{}, false, nil
		}
		item, _ := facts.Readable(facts.Product, out.Item)
		if err := attributevalue.UnmarshalMap(item, &p); err != nil || p.Version < 1 {
			return bulkItem{}, false, nil // counted as failed by the scan
		}
		if p.Version >= held {
			return bulkItem{}, false, nil
		}
		e, err := expression.NewBuilder().
			WithUpdate(expression.Add(expression.Name("version"), expression.Value(held+1-p.Version))).
			WithCondition(expression.Name("version").Equal(expression.Value(p.Version))).Build()
		if err != nil {
			return bulkItem{}, false, err
		}
		_, err = r.cfg.DB.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String(r.cfg.Products), Key: key,
			UpdateExpression: e.Update(), ConditionExpression: e.Condition(), ExpressionAttributeNames: e.Names(), ExpressionAttributeValues: e.Values()})
		var ccf *types.ConditionalCheckFailedException
		var conflict *types.TransactionConflictException
		switch {
		case errors.As(err, &ccf), errors.As(err, &conflict):
			continue // written meanwhile: read again
		case err != nil:
			return bulkItem{}, false, fmt.Errorf("raise the version of product %s: %w", id, err)
		}
		was := p.Version
		p.Version = held + 1
		meta, _ := json.Marshal(map[string]any{"index": map[string]any{"_id": id, "version": p.Version, "version_type": "external_gte"}})
		doc, err := json.Marshal(productsearch.DocumentOf(p))
		if err != nil {
			return bulkItem{}, false, fmt.Errorf("product %s: %w", id, err)
		}
		results, err := r.bulk(ctx, []string{id}, [][]byte{append(append(append(meta, '\n'), doc...), '\n')})
		if err != nil {
			return bulkItem{}, false, err
		}
		r.mu.Lock()
		r.rep.Raised = append(r.rep.Raised, fmt.Sprintf("%s: version %d raised to %d, above the index's %d", id, was, p.Version, held))
		r.mu.Unlock()
		return results[id], true, nil
	}
	return bulkItem{}, false, fmt.Errorf("raise the version of product %s: written %d times while raised", id, maxAttempts)
}

func (r *run) count(results map[string]bulkItem, op string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for id, res := range results {
		switch {
		case res.Status >= 200 && res.Status < 300:
			if op == "delete" {
				r.rep.Deleted++
			} else {
				r.rep.Indexed++
			}
		case res.Status == http.StatusConflict:
			if op == "delete" {
				r.rep.Deleted++ // a newer tombstone is there already
			} else {
				r.rep.Newer++
			}
		case res.Status == http.StatusNotFound && op == "delete":
		default:
			reason := ""
			if res.Error != nil {
				reason = res.Error.Type + ": " + res.Error.Reason
			}
			r.rep.Failed = append(r.rep.Failed, fmt.Sprintf("%s: %s status %d %s", id, op, res.Status, reason))
		}
	}
	r.cfg.Progress.Add(progressName[op], int64(len(results)))
}

// progressName is how the progress line counts the documents of a _bulk
// request, by action (whatever each one's answer).
var progressName = map[string]string{"index": "documents sent", "delete": "deletions sent"}

// removeStale walks the index by productId and deletes the documents of
// products the scan did not see and a consistent read does not find.
func (r *run) removeStale(ctx context.Context) error {
	after := ""
	for {
		query := map[string]any{"match_all": map[string]any{}}
		if after != "" {
			query = map[string]any{"range": map[string]any{"productId": map[string]any{"gt": after}}}
		}
		body, _ := json.Marshal(map[string]any{
			"size": 1000, "sort": []any{map[string]any{"productId": "asc"}},
			"query": query, "_source": []string{"productId"},
		})
		var out struct {
			Hits struct {
				Hits []struct {
					ID     string `json:"_id"`
					Source struct {
						ProductID string `json:"productId"`
					} `json:"_source"`
				} `json:"hits"`
			} `json:"hits"`
		}
		status, raw, err := r.call(ctx, http.MethodPost, productsearch.Index+"/_search", body, "application/json")
		if err == nil {
			err = decode(status, raw, &out)
		}
		if err != nil {
			return fmt.Errorf("walk index %s after %q: %w", productsearch.Index, after, err)
		}
		hits := out.Hits.Hits
		if len(hits) == 0 {
			return nil
		}
		var unseen []string
		r.mu.Lock()
		for _, h := range hits {
			if !r.seen[h.ID] {
				unseen = append(unseen, h.ID)
			}
		}
		r.mu.Unlock()
		r.cfg.Progress.Add("documents walked", int64(len(hits)))
		if err := r.deleteGone(ctx, unseen); err != nil {
			return err
		}
		next := hits[len(hits)-1].Source.ProductID
		if next == "" || next <= after {
			return fmt.Errorf("walk index %s: document %s has no productId to page by", productsearch.Index, hits[len(hits)-1].ID)
		}
		after = next
	}
}

// deleteGone deletes the documents of the ids whose product a consistent read
// does not find. One that exists was created after the scan: the indexer has
// it.
func (r *run) deleteGone(ctx context.Context, ids []string) error {
	for start := 0; start < len(ids); start += 100 {
		chunk := ids[start:min(start+100, len(ids))]
		exists, err := r.existing(ctx, chunk)
		if err != nil {
			return err
		}
		var gone []string
		var actions [][]byte
		for _, id := range chunk {
			if exists[id] {
				continue
			}
			meta, _ := json.Marshal(map[string]any{"delete": map[string]any{"_id": id, "version": DeletedVersion, "version_type": "external_gte"}})
			gone = append(gone, id)
			actions = append(actions, append(meta, '\n'))
		}
		if len(gone) == 0 {
			continue
		}
		results, err := r.bulk(ctx, gone, actions)
		if err != nil {
			return err
		}
		r.count(results, "delete")
	}
	return nil
}

func (r *run) existing(ctx context.Context, ids []string) (map[string]bool, error) {
	keys := make([]map[string]types.AttributeValue, len(ids))
	for i, id := range ids {
		keys[i] = map[string]types.AttributeValue{"productId": &types.AttributeValueMemberS{Value: id}}
	}
	proj, err := expression.NewBuilder().WithProjection(expression.NamesList(expression.Name("productId"))).Build()
	if err != nil {
		return nil, err
	}
	req := map[string]types.KeysAndAttributes{r.cfg.Products: {Keys: keys, ConsistentRead: aws.Bool(true),
		ProjectionExpression: proj.Projection(), ExpressionAttributeNames: proj.Names()}}
	out := map[string]bool{}
	err = ddbcall.BatchGet(ctx, r.cfg.DB, req, ddbcall.Backoff{Base: 10 * time.Millisecond, Cap: time.Second}, func(_ string, item map[string]types.AttributeValue) error {
		if id, ok := item["productId"].(*types.AttributeValueMemberS); ok {
			out[id.Value] = true
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read products: %w", err)
	}
	return out, nil
}
