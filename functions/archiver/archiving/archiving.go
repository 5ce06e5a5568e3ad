// Package archiving writes the items DynamoDB's TTL removes from the orders and
// carts tables to the S3 archive, as gzip JSON Lines, one object per run of a
// batch's records from one table and one day, named after the run's first
// record, so that a retry overwrites instead of duplicating.
package archiving

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/shopstream/shopstream/shared/batchmetrics"
	"github.com/shopstream/shopstream/shared/ddbstream"
	"github.com/shopstream/shopstream/shared/tables"
)

type putter interface {
	PutObject(context.Context, *s3.PutObjectInput, ...func(*s3.Options)) (*s3.PutObjectOutput, error)
}

// Deps are the handler's collaborators.
type Deps struct {
	S3     putter
	Bucket string
	// Tables are the names of the archived tables (the archiver's
	// environment contract, shared/envcontract); a removal from any other
	// table fails.
	Tables   tables.Names
	Logger   *slog.Logger
	Reporter *batchmetrics.Reporter
}

// Handler is the archiver Lambda.
type Handler struct{ deps Deps }

// New returns the handler.
func New(d Deps) *Handler {
	if d.Logger == nil {
		d.Logger = slog.New(slog.DiscardHandler)
	}
	return &Handler{deps: d}
}

// Line is one archived item.
type Line struct {
	EventID   string         `json:"eventId"`
	Table     string         `json:"table"`
	Keys      map[string]any `json:"keys"`
	Item      map[string]any `json:"item"`
	RemovedAt string         `json:"removedAt"`
}

// run is a stretch of a batch's TTL removals, in stream order, from one
// table and one day: one object.
type run struct {
	table, day string
	records    []int
	lines      []Line
}

// Handle archives the TTL removals of a batch, in stream order. The batch is
// cut into runs of one table and one day, each written as one object named
// after its first record; a record that can never be archived (malformed,
// or of a table not archived) ends its run and is reported alone, so the
// records after it are archived and a retry, or a replay, cuts the same
// runs again. At the first object that cannot be written it stops, and
// reports that run's records and every later one: Lambda starts the retry
// there, so no object already written is written under another name. An
// object written again (the same batch sent again, the retry after a
// reported record, the first half of a bisected batch) keeps its name, so
// an eventId is in one object.
func (h *Handler) Handle(ctx context.Context, ev events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
	start := time.Now()
	failed := map[int]bool{} // record positions
	var runs []*run
	cut := true // the next record starts a run
	for i, rec := range ev.Records {
		if !ddbstream.IsTTLRemoval(rec) {
			// The event source lets only TTL removals through; anything else is
			// not ours to archive.
			h.deps.Logger.InfoContext(ctx, "not a ttl removal", "eventId", rec.EventID, "eventName", rec.EventName)
			continue
		}
		logical, ok := h.deps.Tables.Logical(ddbstream.TableName(rec))
		if !ok {
			h.deps.Logger.WarnContext(ctx, "removal from an unknown table", "eventId", rec.EventID, "table", ddbstream.TableName(rec))
			failed[i], cut = true, true
			continue
		}
		line, err := toLine(rec, logical)
		if err != nil {
			h.deps.Logger.WarnContext(ctx, "malformed record", "eventId", rec.EventID, "err", err.Error())
			failed[i], cut = true, true
			continue
		}
		day := rec.Change.ApproximateCreationDateTime.UTC().Format("year=2006/month=01/day=02")
		if cut || runs[len(runs)-1].table != logical || runs[len(runs)-1].day != day {
			runs = append(runs, &run{table: logical, day: day})
			cut = false
		}
		r := runs[len(runs)-1]
		r.records = append(r.records, i)
		r.lines = append(r.lines, line)
	}
	archived, objects := 0, 0
	for _, r := range runs {
		key, err := h.put(ctx, r)
		if err != nil {
			h.deps.Logger.ErrorContext(ctx, "archive object", "table", r.table, "count", len(r.lines), "err", err.Error())
			for i := r.records[0]; i < len(ev.Records); i++ {
				failed[i] = true
			}
			break
		}
		archived += len(r.lines)
		objects++
		h.deps.Logger.InfoContext(ctx, "archived", "table", r.table, "key", key, "count", len(r.lines))
	}
	var resp events.DynamoDBEventResponse
	for i, rec := range ev.Records {
		if failed[i] {
			resp.BatchItemFailures = append(resp.BatchItemFailures, events.DynamoDBBatchItemFailure{ItemIdentifier: rec.Change.SequenceNumber})
		}
	}
	if h.deps.Reporter != nil {
		h.deps.Reporter.Batch(ctx, ev, len(resp.BatchItemFailures), time.Since(start), "archived", archived, "objects", objects)
	}
	return resp, nil
}

// ObjectKey names a run's object after its first record's event id: the
// same run, or a shorter one from the same record (a bisected batch's first
// half), writes the same object again.
func ObjectKey(table, day, firstEventID string) string {
	sum := sha256.Sum256([]byte(firstEventID))
	return table + "/" + day + "/" + hex.EncodeToString(sum[:16]) + ".jsonl.gz"
}

func (h *Handler) put(ctx context.Context, r *run) (string, error) {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	enc := json.NewEncoder(zw)
	for _, l := range r.lines {
		if err := enc.Encode(l); err != nil {
			return "", fmt.Errorf("encode line: %w", err)
		}
	}
	if err := zw.Close(); err != nil {
		return "", fmt.Errorf("gzip: %w", err)
	}
	key := ObjectKey(r.table, r.day, r.lines[0].EventID)
	_, err := h.deps.S3.PutObject(ctx, &s3.PutObjectInput{
		Bucket: aws.String(h.deps.Bucket), Key: aws.String(key), Body: bytes.NewReader(buf.Bytes()),
		ContentType: aws.String("application/x-ndjson"), ContentEncoding: aws.String("gzip"),
	})
	if err != nil {
		return "", fmt.Errorf("put %s: %w", key, err)
	}
	return key, nil
}

func toLine(rec events.DynamoDBEventRecord, table string) (Line, error) {
	keys, err := ddbstream.Image(rec.Change.Keys)
	if err != nil {
		return Line{}, fmt.Errorf("keys: %w", err)
	}
	item, err := ddbstream.Image(rec.Change.OldImage)
	if err != nil {
		return Line{}, fmt.Errorf("old image: %w", err)
	}
	if len(item) == 0 {
		return Line{}, fmt.Errorf("removal without its old image")
	}
	if rec.Change.ApproximateCreationDateTime.IsZero() {
		// The removal's date names the object; without it the record cannot be filed.
		return Line{}, fmt.Errorf("removal without its approximate creation time")
	}
	return Line{EventID: rec.EventID, Table: table, Keys: plainMap(keys), Item: plainMap(item),
		RemovedAt: rec.Change.ApproximateCreationDateTime.UTC().Format(time.RFC3339)}, nil
}

func plainMap(m map[string]types.AttributeValue) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = plain(v)
	}
	return out
}

// plain renders an attribute value as ordinary JSON: numbers stay exact
// (json.Number), binary is base64, sets are arrays.
func plain(v types.AttributeValue) any {
	switch x := v.(type) {
	case *types.AttributeValueMemberS:
		return x.Value
	case *types.AttributeValueMemberN:
		return json.Number(x.Value)
	case *types.AttributeValueMemberB:
		return base64.StdEncoding.EncodeToString(x.Value)
	case *types.AttributeValueMemberBOOL:
		return x.Value
	case *types.AttributeValueMemberNULL:
		return nil
	case *types.AttributeValueMemberSS:
		return x.Value
	case *types.AttributeValueMemberNS:
		out := make([]json.Number, len(x.Value))
		for i, n := range x.Value {
			out[i] = json.Number(n)
		}
		return out
	case *types.AttributeValueMemberBS:
		out := make([]string, len(x.Value))
		for i, b := range x.Value {
			out[i] = base64.StdEncoding.EncodeToString(b)
		}
		return out
	case *types.AttributeValueMemberL:
		out := make([]any, len(x.Value))
		for i, e := range x.Value {
			out[i] = plain(e)
		}
		return out
	case *types.AttributeValueMemberM:
		return plainMap(x.Value)
	}
	return nil
}
