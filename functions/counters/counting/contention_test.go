package counting_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/shopstream/shopstream/functions/api/store"
	"github.com/shopstream/shopstream/infra/local/ddbfront"
	"github.com/shopstream/shopstream/infra/local/stacktest"
	"github.com/shopstream/shopstream/shared/orders"
	catalog "github.com/shopstream/shopstream/shared/products"
	accounts "github.com/shopstream/shopstream/shared/users"
)

// TestContentionWithStockOnHotProduct places orders of one hot product
// through the API's store (each a transaction decrementing a stock bucket)
// while the counters apply the placements' records to the product, each
// batch twice at once (the duplicates contend for the product item), and
// the local front cancels transactions on the products table with
// TransactionConflict besides. Stock and counters must both come out exact,
// and no batch may fail: contention is retried, not reported.
func TestContentionWithStockOnHotProduct(t *testing.T) {
	st := stacktest.Stack(t)
	ctx := context.Background()
	prefix := stacktest.Tables(t)
	f := newFixture(t, st.DynamoDB(), prefix)
	api := store.New(st.DynamoDB(), store.Config{Tables: store.TablesWithPrefix(prefix)})
	const stock, placers, perPlacer = 1000, 4, 8
	hot, err := api.CreateProduct(ctx, catalog.New{Name: "Hot", Description: "sells", Category: "home", PriceCents: aws.Int64(250), Stock: aws.Int64(stock)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := api.CreateUser(ctx, "buyer", accounts.New{Email: "buyer@example.com", Name: "Buyer"}); err != nil {
		t.Fatal(err)
	}
	remove := st.Front.InjectFault(ddbfront.Fault{Table: f.tables.Products, Operation: "TransactWriteItems", Code: "TransactionConflict", Times: 8})
	defer remove()

	placed := make(chan events.DynamoDBEventRecord)
	var sold, spent int64
	var mu sync.Mutex
	var placing sync.WaitGroup
	for p := range placers {
		placing.Add(1)
		go func() {
			defer placing.Done()
			for i := range perPlacer {
				q := 1 + (p+i)%3
				o, err := api.PlaceOrder(ctx, "buyer", orders.Request{Items: []orders.Item{{ProductID: hot.ProductID, Quantity: q}}}, nil)
				if err != nil {
					t.Errorf("place order: %v", err)
					continue
				}
				mu.Lock()
				sold, spent = sold+int64(q), spent+o.TotalCents
				mu.Unlock()
				placed <- f.record(f.tables.Orders, "INSERT", nil, orderImage("buyer", o.OrderID, "PLACED", o.TotalCents, line{hot.ProductID, q}))
			}
		}()
	}
	go func() { placing.Wait(); close(placed) }()

	var counting sync.WaitGroup
	deliver := func(batch []events.DynamoDBEventRecord) {
		for range 2 { // a duplicate in flight
			counting.Add(1)
			go func() {
				defer counting.Done()
				resp, err := f.h.Handle(ctx, events.DynamoDBEvent{Records: batch})
				if err != nil || len(resp.BatchItemFailures) != 0 {
					t.Errorf("counters batch: got %v, %v; want no failure", resp.BatchItemFailures, err)
				}
			}()
		}
	}
	var batch []events.DynamoDBEventRecord
	for rec := range placed {
		if batch = append(batch, rec); len(batch) == 3 {
			deliver(batch)
			batch = nil
		}
	}
	if len(batch) > 0 {
		deliver(batch)
	}
	counting.Wait()

	for _, left := range st.Front.ActiveFaults() {
		if left.Table == f.tables.Products {
			t.Errorf("fault left: %+v; the writers never met the conflicts", left)
		}
	}
	out, err := f.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(f.tables.Products),
		Key: map[string]types.AttributeValue{"productId": s(hot.ProductID)}, ConsistentRead: aws.Bool(true)})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	if v, ok := out.Item["unitsSold"].(*types.AttributeValueMemberN); ok {
		got["unitsSold"] = v.Value
	}
	// The product page reads the stock eventually consistent: it shows the
	// last sales once that read has caught up with them.
	time.Sleep(ddbfront.DefaultStaleReads + 30*time.Millisecond)
	p, err := api.GetProduct(ctx, hot.ProductID)
	if err != nil {
		t.Fatal(err)
	}
	got["stock"] = fmt.Sprint(p.Stock)
	want := map[string]string{"stock": fmt.Sprint(stock - sold), "unitsSold": fmt.Sprint(sold)}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("hot product: got %v, want %v", got, want)
	}
	if got, want := f.counters(f.tables.Users, "userId", "buyer"), (map[string]int64{"orderCount": placers * perPlacer, "lifetimeSpendCents": spent}); got["orderCount"] != want["orderCount"] || got["lifetimeSpendCents"] != want["lifetimeSpendCents"] {
		t.Errorf("buyer: got %v, want %v", got, want)
	}
}
