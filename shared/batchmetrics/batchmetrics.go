// Package batchmetrics reports one stream batch: a structured log line and a
// CloudWatch Embedded Metric Format line (records, failures, stream lag), the
// same for every stream function.
package batchmetrics

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"
)

// Namespace is the CloudWatch namespace of the stream functions' metrics.
const Namespace = "shopstream/streams"

// FreshnessMetric is the age of each record a function processes (now minus
// its ApproximateCreationDateTime, in milliseconds): one value per record,
// so CloudWatch's percentiles are the records' (an alarm on its p99).
const FreshnessMetric = "freshness"

// maxValues is the most values an EMF metric may hold in one line.
const maxValues = 100

// Ages are the records' ages in milliseconds (none for a record without a
// creation time).
func Ages(ev events.DynamoDBEvent, now time.Time) []int64 {
	ages := make([]int64, 0, len(ev.Records))
	for _, r := range ev.Records {
		if t := r.Change.ApproximateCreationDateTime.Time; !t.IsZero() {
			ages = append(ages, max(now.Sub(t), 0).Milliseconds())
		}
	}
	return ages
}

// Reporter writes batch reports for one function.
type Reporter struct {
	// Function names the function in the metrics.
	Function string
	// Logger writes the batch line; it carries the function's name already
	// (key "function", as on every line of the function), so the line does
	// not add it again: a key twice is not valid JSON for strict parsers.
	Logger *slog.Logger
	// Metrics receives EMF lines (stdout on Lambda); nil discards them.
	Metrics io.Writer
	Now     func() time.Time
	mu      sync.Mutex
}

// Lag is now minus the oldest record's approximate creation time.
func Lag(ev events.DynamoDBEvent, now time.Time) time.Duration {
	var oldest time.Time
	for _, r := range ev.Records {
		t := r.Change.ApproximateCreationDateTime.Time
		if !t.IsZero() && (oldest.IsZero() || t.Before(oldest)) {
			oldest = t
		}
	}
	if oldest.IsZero() {
		return 0
	}
	return now.Sub(oldest)
}

// Batch reports a processed batch.
func (r *Reporter) Batch(ctx context.Context, ev events.DynamoDBEvent, failures int, took time.Duration, attrs ...any) {
	now := time.Now()
	if r.Now != nil {
		now = r.Now()
	}
	lag := Lag(ev, now)
	ms := float64(took.Microseconds()) / 1000
	args := append([]any{"records", len(ev.Records), "failures", failures, "ms", ms, "lagMs", lag.Milliseconds()}, attrs...)
	if r.Logger != nil {
		r.Logger.InfoContext(ctx, "batch", args...)
	}
	if r.Metrics == nil {
		return
	}
	rec := map[string]any{
		"function": r.Function, "records": len(ev.Records), "failures": failures, "streamLag": lag.Milliseconds(), "duration": ms,
		"_aws": map[string]any{"Timestamp": now.UnixMilli(), "CloudWatchMetrics": []map[string]any{{
			"Namespace":  Namespace,
			"Dimensions": [][]string{{"function"}},
			"Metrics": []map[string]string{
				{"Name": "records", "Unit": "Count"}, {"Name": "failures", "Unit": "Count"},
				{"Name": "streamLag", "Unit": "Milliseconds"}, {"Name": "duration", "Unit": "Milliseconds"},
				{"Name": FreshnessMetric, "Unit": "Milliseconds"},
			},
		}}},
	}
	if ages := Ages(ev, now); len(ages) > 0 {
		rec[FreshnessMetric] = ages[:min(len(ages), maxValues)]
	} else {
		rec[FreshnessMetric] = lag.Milliseconds()
	}
	line, err := json.Marshal(rec)
	if err != nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	_, _ = r.Metrics.Write(append(line, '\n'))
}
