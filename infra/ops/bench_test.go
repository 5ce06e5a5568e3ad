package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/shopstream/shopstream/infra/ops/replay"
	"github.com/shopstream/shopstream/infra/ops/target"
	"github.com/shopstream/shopstream/shared/failures"
	"github.com/shopstream/shopstream/shared/orders"
	"github.com/shopstream/shopstream/shared/tables"
)

// BenchmarkReplayBacklog replays a backlog of 10,000 order records (100 users,
// each user's orders spread over 100 products) that the orders counters gave
// up on (their writes denied during the incident) through the counters,
// locally, as `make replay` does against `make run` (streams polled at the
// mappings' default), and reports records/s. Each
// iteration after the first replays the same objects again (markers removed):
// then every record is found applied.
//
//	go test -run '^$' -bench ReplayBacklog -benchtime 1x ./infra/ops
func BenchmarkReplayBacklog(b *testing.B) {
	const records, users, products = 10000, 100, 100
	d := startDrill(b, drillOptions{defaultPoll: true})
	ctx := context.Background()
	db := d.sys.DynamoDB()
	for i := range users {
		d.putItem(tables.Users, map[string]any{"userId": fmt.Sprintf("u%03d", i), "name": "U", "version": 1})
	}
	for i := range products {
		d.putItem(tables.Products, map[string]any{"productId": fmt.Sprintf("p%03d", i), "name": "P", "version": 1})
	}
	d.fault(tables.CounterEvents, "TransactWriteItems", "AccessDeniedException")
	now := time.Now().UTC().Format(time.RFC3339Nano)
	var batch []types.WriteRequest
	flush := func() {
		for len(batch) > 0 {
			out, err := db.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{RequestItems: map[string][]types.WriteRequest{d.prefix + tables.Orders: batch}})
			if err != nil {
				b.Fatal(err)
			}
			batch = out.UnprocessedItems[d.prefix+tables.Orders]
		}
	}
	for i := range records {
		o := orders.Order{UserID: fmt.Sprintf("u%03d", i%users), OrderID: fmt.Sprintf("01BENCH%019d", i), Status: "PLACED", TotalCents: 500,
			Version: 1, CreatedAt: now, UpdatedAt: now,
			Lines: []orders.Line{{ProductID: fmt.Sprintf("p%03d", (i*7+i/users)%products), ProductName: "P", UnitPriceCents: 250, Quantity: 2}}}
		item, err := attributevalue.MarshalMap(o)
		if err != nil {
			b.Fatal(err)
		}
		batch = append(batch, types.WriteRequest{PutRequest: &types.PutRequest{Item: item}})
		if len(batch) == 25 {
			flush()
		}
	}
	flush()
	deadline := time.Now().Add(10 * time.Minute)
	for {
		n := 0
		for _, o := range d.failed()["orders-counters"] {
			n += len(o.Payload.Records)
		}
		if n == records {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("backlog: %d records in the failure bucket, want %d", n, records)
		}
		time.Sleep(time.Second)
	}
	d.clearFaults()
	tg, err := target.Resolve(ctx, d.getenv())
	if err != nil {
		b.Fatal(err)
	}
	inv, err := invoker(tg, env{logger: testLogger()})
	if err != nil {
		b.Fatal(err)
	}
	var replayed int
	var took time.Duration
	b.ResetTimer()
	for i := range b.N {
		if i > 0 {
			b.StopTimer()
			for _, key := range d.objects(failures.ReplayedPrefix) {
				d.remove(d.sys.FailureBucket, key)
			}
			b.StartTimer()
		}
		var report strings.Builder
		start := time.Now()
		res, err := replay.Run(ctx, replay.Config{Store: d.s3, Bucket: d.sys.FailureBucket, Target: tg, Invoker: inv, Out: &report})
		took += time.Since(start)
		if err != nil || res.Succeeded != records {
			for _, l := range strings.Split(report.String(), "\n") {
				if !strings.HasPrefix(l, "replayed") {
					b.Log(l)
				}
			}
			b.Fatalf("replay: %+v, %v", res, err)
		}
		replayed += res.Succeeded
	}
	b.StopTimer()
	b.ReportMetric(float64(replayed)/took.Seconds(), "records/s")
	// Exact after every replay, the repeated ones included: each user's and
	// each product's counters as the backlog's orders make them.
	units := map[string]int64{}
	for i := range records {
		units[fmt.Sprintf("p%03d", (i*7+i/users)%products)] += 2
	}
	for i := range users {
		id := fmt.Sprintf("u%03d", i)
		var u user
		d.api(200, "GET", "/users/"+id, id, nil, &u)
		if u.OrderCount != records/users || u.LifetimeSpendCents != 500*records/users {
			b.Errorf("%s after the replays: got %+v, want %d orders, %d¢", id, u, records/users, 500*records/users)
		}
	}
	for i := range products {
		id := fmt.Sprintf("p%03d", i)
		// The bench's products are bare items, not the API's: read the table.
		out, err := db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(d.prefix + tables.Products), ConsistentRead: aws.Bool(true),
			Key: map[string]types.AttributeValue{"productId": &types.AttributeValueMemberS{Value: id}}})
		if err != nil {
			b.Fatal(err)
		}
		var p product
		if err := attributevalue.UnmarshalMap(out.Item, &p); err != nil {
			b.Fatal(err)
		}
		if p.UnitsSold != units[id] {
			b.Errorf("%s after the replays: %d units sold, want %d", id, p.UnitsSold, units[id])
		}
	}
}
