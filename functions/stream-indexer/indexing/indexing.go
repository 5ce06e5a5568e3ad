// Package indexing keeps the search index `products` in step with the products
// table's stream: one _bulk request per batch, each document written with the
// item's own version as an external version, so an older change never
// overwrites a newer one.
package indexing

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/opensearch-project/opensearch-go/v4"
	"github.com/opensearch-project/opensearch-go/v4/opensearchapi"

	"github.com/shopstream/shopstream/shared/batchmetrics"
	"github.com/shopstream/shopstream/shared/ddbstream"
	"github.com/shopstream/shopstream/shared/facts"
	"github.com/shopstream/shopstream/shared/products"
	"github.com/shopstream/shopstream/shared/productsearch"
)

// Deps are the handler's collaborators.
type Deps struct {
	Search   *opensearchapi.Client
	Logger   *slog.Logger
	Reporter *batchmetrics.Reporter
}

// Handler is the stream-indexer Lambda.
type Handler struct {
	deps  Deps
	mu    sync.Mutex
	ready bool
}

// New returns the handler.
func New(d Deps) *Handler {
	if d.Logger == nil {
		d.Logger = slog.New(slog.DiscardHandler)
	}
	return &Handler{deps: d}
}

func (h *Handler) ensureIndex(ctx context.Context) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.ready {
		return nil
	}
	_, err := h.deps.Search.Indices.Create(ctx, opensearchapi.IndicesCreateReq{Index: productsearch.Index, Body: strings.NewReader(productsearch.Mapping)})
	var se *opensearch.StructError
	if err != nil && !(errors.As(err, &se) && se.Err.Type == "resource_already_exists_exception") {
		return fmt.Errorf("create index %s: %w", productsearch.Index, err)
	}
	h.ready = true
	return nil
}

// Handle indexes a batch with one _bulk request.
func (h *Handler) Handle(ctx context.Context, ev events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
	start := time.Now()
	var resp events.DynamoDBEventResponse
	fail := func(i int) {
		resp.BatchItemFailures = append(resp.BatchItemFailures, events.DynamoDBBatchItemFailure{ItemIdentifier: ev.Records[i].Change.SequenceNumber})
	}
	var body bytes.Buffer
	var sent []int // record index of each bulk action
	for i, rec := range ev.Records {
		line, unreadable, err := action(rec)
		for _, u := range unreadable {
			h.deps.Logger.ErrorContext(ctx, "counter unreadable: indexed as none counted until make audit REPAIR=1 sets it",
				"eventId", rec.EventID, "attribute", u.Name, "holds", u.Holds)
		}
		if err != nil {
			h.deps.Logger.WarnContext(ctx, "malformed record", "eventId", rec.EventID, "err", err.Error())
			fail(i)
			continue
		}
		body.Write(line)
		sent = append(sent, i)
	}
	if len(sent) > 0 {
		failed, err := h.bulk(ctx, &body, len(sent))
		if err != nil {
			h.deps.Logger.ErrorContext(ctx, "bulk", "count", len(sent), "err", err.Error())
			for _, i := range sent {
				fail(i)
			}
		}
		for _, k := range failed {
			fail(sent[k])
		}
	}
	if h.deps.Reporter != nil {
		h.deps.Reporter.Batch(ctx, ev, len(resp.BatchItemFailures), time.Since(start))
	}
	return resp, nil
}

// action renders a record as _bulk NDJSON, and names the counters of its
// image that it took as none counted, since they hold no integer
// (facts.Readable): the API shows them so too.
func action(rec events.DynamoDBEventRecord) ([]byte, []facts.Unreadable, error) {
	var img map[string]events.DynamoDBAttributeValue
	version := "external_gte"
	switch rec.EventName {
	case "INSERT", "MODIFY":
		img = rec.Change.NewImage
	case "REMOVE":
		img = rec.Change.OldImage
	default:
		return nil, nil, fmt.Errorf("unknown event name %q", rec.EventName)
	}
	item, err := ddbstream.Image(img)
	if err != nil {
		return nil, nil, err
	}
	item, unreadable := facts.Readable(facts.Product, item)
	var p products.Product
	if err := attributevalue.UnmarshalMap(item, &p); err != nil {
		return nil, unreadable, fmt.Errorf("decode image: %w", err)
	}
	if p.ProductID == "" || p.Version < 1 {
		return nil, unreadable, fmt.Errorf("product image without productId or version")
	}
	// No _index: the request's path names it (the deployed domain refuses an
	// index in a bulk body, rest.action.multi.allow_explicit_index false).
	meta := map[string]any{"_id": p.ProductID, "version": p.Version, "version_type": version}
	var out bytes.Buffer
	if rec.EventName == "REMOVE" {
		// A delete carries the deleted item's version + 1, so the index's
		// tombstone outranks every write of that item.
		meta["version"] = p.Version + 1
		b, _ := json.Marshal(map[string]any{"delete": meta})
		out.Write(append(b, '\n'))
		return out.Bytes(), unreadable, nil
	}
	b, _ := json.Marshal(map[string]any{"index": meta})
	out.Write(append(b, '\n'))
	doc, err := json.Marshal(productsearch.DocumentOf(p))
	if err != nil {
		return nil, unreadable, err
	}
	out.Write(append(doc, '\n'))
	return out.Bytes(), unreadable, nil
}

// bulk sends the actions and returns the positions of the ones that failed;
// a version conflict is success (a newer change is already there) and so is
// deleting what is not there.
func (h *Handler) bulk(ctx context.Context, body *bytes.Buffer, n int) ([]int, error) {
	if err := h.ensureIndex(ctx); err != nil {
		return nil, err
	}
	res, err := h.deps.Search.Bulk(ctx, opensearchapi.BulkReq{Index: productsearch.Index, Body: body})
	if err != nil {
		return nil, fmt.Errorf("bulk: %w", err)
	}
	if len(res.Items) != n {
		return nil, fmt.Errorf("bulk: %d results for %d actions", len(res.Items), n)
	}
	var failed []int
	for k, item := range res.Items {
		for op, r := range item {
			switch {
			case r.Status >= 200 && r.Status < 300:
			case r.Status == 409:
			case r.Status == 404 && op == "delete":
			default:
				reason := ""
				if r.Error != nil {
					reason = r.Error.Type + ": " + r.Error.Reason
				}
				h.deps.Logger.WarnContext(ctx, "bulk item failed", "productId", r.ID, "status", r.Status, "reason", reason)
				failed = append(failed, k)
			}
		}
	}
	return failed, nil
}
