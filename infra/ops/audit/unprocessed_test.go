package audit_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/shopstream/shopstream/infra/local/ddbfront"
	"github.com/shopstream/shopstream/infra/local/stacktest"
	"github.com/shopstream/shopstream/infra/ops/audit"
	"github.com/shopstream/shopstream/shared/facts"
)

// The audit's two batch reads (counter items by key, markers still absent
// after the settle) meet a spent partition's key unprocessed, as on AWS,
// and ask again for it. The front's clock stands still while a partition is
// spent; during the workload it is moved on every few milliseconds.
func TestAuditAsksAgainForUnprocessedKeys(t *testing.T) {
	clock := stacktest.NewStillClock()
	f := newFixtureLimits(t, time.Hour, nil, ddbfront.Limits{PartitionRCU: 10, Partitions: 1 << 30, Now: clock.Now}) // a partition for each key value: the spent key alone is short
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-done:
				return
			case <-time.After(5 * time.Millisecond):
				clock.Refill()
			}
		}
	})
	f.createUser("hot")
	f.createUser("cold")
	p := f.createProduct("kettle", 1500)
	o1 := f.mustOrder("hot", []string{p}, []int{1})
	o2 := f.mustOrder("cold", []string{p}, []int{2})
	f.idle()
	close(done)
	wg.Wait()
	ctx := context.Background()
	db := f.sys.DynamoDB()

	t.Run("counter items", func(t *testing.T) {
		clock.Refill()
		stacktest.SpendReads(t, db, f.tables().Users, map[string]types.AttributeValue{"userId": &types.AttributeValueMemberS{Value: "hot"}})
		stop := stacktest.RefillOnUnprocessed(t, f.sys.Stack, clock)
		rep, err := f.auditor(audit.Config{}).Recount(ctx, []audit.Item{user("hot"), user("cold"), product(p)})
		if !stop() {
			t.Errorf("no key came back unprocessed")
		}
		if err != nil {
			t.Fatal(err)
		}
		if len(rep.Drift) != 0 {
			t.Errorf("drift %+v, want none", rep.Drift)
		}
	})

	t.Run("markers still absent", func(t *testing.T) {
		var keys []string
		for _, o := range []string{o1.OrderID, o2.OrderID} {
			k := facts.Placed(facts.Order{OrderID: o}).Key
			keys = append(keys, k)
			if _, err := db.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(f.tables().CounterEvents),
				Key: map[string]types.AttributeValue{facts.KeyAttr: &types.AttributeValueMemberS{Value: k}}}); err != nil {
				t.Fatal(err)
			}
		}
		clock.Refill()
		stacktest.SpendReads(t, db, f.tables().CounterEvents, map[string]types.AttributeValue{facts.KeyAttr: &types.AttributeValueMemberS{Value: keys[0]}})
		stop := stacktest.RefillOnUnprocessed(t, f.sys.Stack, clock)
		rep := run(t, f.auditor(audit.Config{Settle: 10 * time.Millisecond}))
		if !stop() {
			t.Errorf("no key came back unprocessed")
		}
		if rep.Missing != 2 {
			t.Errorf("missing: got %d, want the 2 facts whose markers were deleted", rep.Missing)
		}
	})
}
