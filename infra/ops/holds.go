package main

import (
	"context"
	"fmt"
	"io"
	"sort"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/shopstream/shopstream/functions/api/store"
	"github.com/shopstream/shopstream/infra/ops/target"
	"github.com/shopstream/shopstream/shared/stock"
	"github.com/shopstream/shopstream/shared/tables"
)

// holdsReport is what the audit found of the stock buckets' holds: those
// older than stock.StaleAfter (an order's writes stopped between the take
// of its units and the order), by product, and what settling them did.
type holdsReport struct {
	stale   map[string]int // product → stale holds
	settled store.Settled
	failed  int
}

// remaining is the stale holds left unsettled.
func (r holdsReport) remaining() int {
	n := -r.settled.Released - r.settled.Returned
	for _, c := range r.stale {
		n += c
	}
	return max(n, 0)
}

// auditHolds scans the stock buckets for stale holds and, with repair,
// settles each from the orders table through the API's own store
// (store.SettleStaleHolds): the order exists, the hold goes; it does not,
// its units go back, once.
func auditHolds(ctx context.Context, t *target.Target, repair bool, now time.Time) (holdsReport, error) {
	db := t.DynamoDB()
	rep := holdsReport{stale: map[string]int{}}
	in := &dynamodb.ScanInput{
		TableName:                aws.String(t.Tables[tables.ProductStock]),
		ProjectionExpression:     aws.String("productId, #h"),
		FilterExpression:         aws.String("attribute_exists(#h)"),
		ExpressionAttributeNames: map[string]string{"#h": "holds"},
		ConsistentRead:           aws.Bool(true),
	}
	for {
		out, err := db.Scan(ctx, in)
		if err != nil {
			return rep, fmt.Errorf("scan the stock buckets' holds: %w", err)
		}
		for _, it := range out.Items {
			id, _ := it["productId"].(*types.AttributeValueMemberS)
			ss, _ := it["holds"].(*types.AttributeValueMemberSS)
			if id == nil || ss == nil {
				continue
			}
			for _, raw := range ss.Value {
				if h, err := stock.ParseHold(raw); err == nil && h.Stale(now) {
					rep.stale[id.Value]++
				}
			}
		}
		if len(out.LastEvaluatedKey) == 0 {
			break
		}
		in.ExclusiveStartKey = out.LastEvaluatedKey
	}
	if !repair || len(rep.stale) == 0 {
		return rep, nil
	}
	var names tables.Names
	for logical, physical := range t.Tables {
		if err := names.Set(logical, physical); err != nil {
			return rep, err
		}
	}
	st := store.New(db, store.Config{Tables: names, Now: func() time.Time { return now }})
	for _, id := range sortedKeys(rep.stale) {
		s, err := st.SettleStaleHolds(ctx, id)
		rep.settled.Released += s.Released
		rep.settled.Returned += s.Returned
		rep.settled.Units += s.Units
		if err != nil {
			rep.failed++
		}
	}
	return rep, nil
}

// write prints the report's line.
func (r holdsReport) write(w io.Writer) error {
	n := 0
	for _, c := range r.stale {
		n += c
	}
	_, err := fmt.Fprintf(w, "audit: stock holds: %d stale on %d products; %d released (order written), %d returned (%d units), %d left\n",
		n, len(r.stale), r.settled.Released, r.settled.Returned, r.settled.Units, r.remaining())
	return err
}

func sortedKeys(m map[string]int) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
