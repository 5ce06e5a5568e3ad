package batchmetrics

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
)

func TestBatchWritesEMF(t *testing.T) {
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	ev := events.DynamoDBEvent{Records: []events.DynamoDBEventRecord{
		{Change: events.DynamoDBStreamRecord{ApproximateCreationDateTime: events.SecondsEpochTime{Time: now.Add(-3 * time.Second)}}},
		{Change: events.DynamoDBStreamRecord{ApproximateCreationDateTime: events.SecondsEpochTime{Time: now.Add(-time.Second)}}},
	}}
	var buf bytes.Buffer
	r := &Reporter{Function: "counters", Metrics: &buf, Now: func() time.Time { return now }}
	r.Batch(context.Background(), ev, 1, 5*time.Millisecond)
	var got struct {
		Records   int   `json:"records"`
		Failures  int   `json:"failures"`
		StreamLag int64 `json:"streamLag"`
		AWS       struct {
			CloudWatchMetrics []struct{ Namespace string } `json:"CloudWatchMetrics"`
		} `json:"_aws"`
	}
	if err := json.Unmarshal(buf.Bytes(), &got); err != nil {
		t.Fatalf("decode %q: %v", buf.String(), err)
	}
	if got.Records != 2 || got.Failures != 1 || got.StreamLag != 3000 || len(got.AWS.CloudWatchMetrics) != 1 || got.AWS.CloudWatchMetrics[0].Namespace != Namespace {
		t.Errorf("got %+v", got)
	}
}
