package stacktest

import (
	"context"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Load writes items with BatchWriteItem, 25 at a time, 8 calls at once:
// benchmarks use it to fill tables fast.
func Load(tb testing.TB, db *dynamodb.Client, table string, items []map[string]any) {
	tb.Helper()
	ctx := context.Background()
	work := make(chan []map[string]any)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for chunk := range work {
				var reqs []types.WriteRequest
				for _, it := range chunk {
					av, err := attributevalue.MarshalMap(it)
					if err != nil {
						tb.Error(err)
						return
					}
					reqs = append(reqs, types.WriteRequest{PutRequest: &types.PutRequest{Item: av}})
				}
				in := map[string][]types.WriteRequest{table: reqs}
				for len(in) > 0 {
					out, err := db.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{RequestItems: in})
					if err != nil {
						tb.Error(err)
						return
					}
					in = out.UnprocessedItems
				}
			}
		})
	}
	for start := 0; start < len(items); start += 25 {
		work <- items[start:min(start+25, len(items))]
	}
	close(work)
	wg.Wait()
}
