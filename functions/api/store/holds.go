package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"

	"github.com/shopstream/shopstream/shared/errcode"
	"github.com/shopstream/shopstream/shared/orders"
	"github.com/shopstream/shopstream/shared/products"
	"github.com/shopstream/shopstream/shared/stock"
)

// An order takes its units from its buckets with single-item conditional
// writes before its transaction, each recording a hold (stock.Hold) in the
// bucket's "holds" set, and its transaction (the order, the idempotency
// claim, the cart) touches no bucket. A transaction holds its items until
// it answers, so concurrent transactions on one bucket cancel each other
// (TransactionConflict): a bucket served one order at a time. Single-item
// writes to one item do not conflict with one another; they queue at the
// item's partition, which serves 1,000 WCU a second
// (docs/data-model.md, "the order path").
//
// Every path ends with the units sold once or given back once:
//   - a take is conditional on its hold being absent, so a retried write
//     that had already applied fails its condition and finds its hold;
//   - the order written, its holds are removed (release);
//   - the order not written, its units go back and its holds are removed in
//     one write conditional on the hold being present (giveBack);
//   - a process stopped in between leaves a hold that whoever finds it
//     stale settles from the order table (settle): the order exists, the
//     hold is removed; it does not, the units go back.

// holdsAttr is the bucket's set of holds.
const holdsAttr = "holds"

// heldTake is one take of an order and its hold.
type heldTake struct {
	decrementRef
	product products.Product
	hold    stock.Hold
}

// takeResult is how one take's write ended.
type takeResult struct {
	outcome commitOutcome // placed (taken), replan (its condition failed), contended
	item    map[string]types.AttributeValue
	stale   []stock.Hold // stale holds the write found on the bucket
	err     error
}

func holdSet(h stock.Hold) types.AttributeValue {
	return &types.AttributeValueMemberSS{Value: []string{h.String()}}
}

// takeInput is the write that takes t's units from its bucket and records
// its hold, on the condition that the bucket holds them, still carries the
// price and name the order read, and does not hold the hold yet.
func (s *Store) takeInput(t heldTake) *dynamodb.UpdateItemInput {
	upd := expression.Set(expression.Name("units"), expression.Name("units").Minus(expression.Value(t.Units))).
		Add(expression.Name("version"), expression.Value(1)).
		Add(expression.Name(holdsAttr), expression.Value(holdSet(t.hold)))
	cond := expression.AttributeExists(expression.Name("bucketId")).
		And(expression.Name("units").GreaterThanEqual(expression.Value(t.Units))).
		And(expression.Name("priceCents").Equal(expression.Value(t.product.PriceCents))).
		And(expression.Name("name").Equal(expression.Value(t.product.Name))).
		And(expression.Not(expression.Contains(expression.Name(holdsAttr), t.hold.String())))
	e := mustBuild(expression.NewBuilder().WithUpdate(upd).WithCondition(cond))
	return &dynamodb.UpdateItemInput{
		TableName: aws.String(s.t.ProductStock), Key: bucketKey(t.productID, t.Bucket),
		UpdateExpression: e.Update(), ConditionExpression: e.Condition(),
		ExpressionAttributeNames: e.Names(), ExpressionAttributeValues: e.Values(),
		ReturnValues:                        types.ReturnValueUpdatedNew,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}
}

// take writes one take.
func (s *Store) take(ctx context.Context, t heldTake) takeResult {
	out, err := s.db.UpdateItem(ctx, s.takeInput(t))
	if err == nil {
		return takeResult{outcome: placed, stale: s.staleIn(out.Attributes)}
	}
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		if slices.Contains(holdsOf(ccf.Item), t.hold.String()) {
			return takeResult{outcome: placed} // an earlier try of this write applied
		}
		return takeResult{outcome: replan, item: ccf.Item}
	}
	if busy(err) {
		return takeResult{outcome: contended}
	}
	return takeResult{outcome: failed, err: unknownAsUnavailable(err)}
}

// busy reports contention or throttling that outlasted the client's
// retries: the write did not apply.
func busy(err error) bool {
	var ae smithy.APIError
	if !errors.As(err, &ae) {
		return false
	}
	switch ae.ErrorCode() {
	case "ProvisionedThroughputExceededException", "ThrottlingException", "RequestLimitExceeded", "TransactionConflictException":
		return true
	}
	return false
}

// unknownAsUnavailable is classify, with a failure that is not DynamoDB's
// answer (a connection lost, a deadline) Unavailable: the write may or may
// not have applied, and the client may try again.
func unknownAsUnavailable(err error) error {
	err = classify(err)
	var ae smithy.APIError
	if errcode.As(err) == nil && !errors.As(err, &ae) {
		return unavailable(err)
	}
	return err
}

func holdsOf(item map[string]types.AttributeValue) []string {
	if ss, ok := item[holdsAttr].(*types.AttributeValueMemberSS); ok {
		return ss.Value
	}
	return nil
}

// staleIn is the stale holds of a bucket's attributes.
func (s *Store) staleIn(item map[string]types.AttributeValue) []stock.Hold {
	var out []stock.Hold
	for _, raw := range holdsOf(item) {
		if h, err := stock.ParseHold(raw); err == nil && h.Stale(s.now()) {
			out = append(out, h)
		}
	}
	return out
}

// eachTake runs f on every take, at most 8 at once, and returns the results
// in the takes' order.
func eachTake[R any](ctx context.Context, takes []heldTake, f func(context.Context, heldTake) R) []R {
	out := make([]R, len(takes))
	if len(takes) == 1 {
		out[0] = f(ctx, takes[0])
		return out
	}
	sem := make(chan struct{}, 8)
	var wg sync.WaitGroup
	for i, t := range takes {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			out[i] = f(ctx, t)
		})
	}
	wg.Wait()
	return out
}

// commitHeld is commitOrder's round for an order whose takes are all from
// buckets: the takes, then the order's transaction (tx without its
// decrements), then the holds' release.
func (s *Store) commitHeld(ctx context.Context, o orders.Order, rd orderRead, tx *placement, l *orderLessons) (commitOutcome, error) {
	at := s.now()
	takes := make([]heldTake, len(tx.decrements))
	for i, d := range tx.decrements {
		takes[i] = heldTake{decrementRef: d, product: rd.products[d.productID],
			hold: stock.Hold{At: at, Units: d.Units, OrderID: o.OrderID, UserID: o.UserID}}
	}
	results := eachTake(ctx, takes, s.take)
	outcome, takeErr := placed, error(nil)
	var stale []staleHold
	for i, r := range results {
		switch r.outcome {
		case replan:
			l.learn(takes[i].decrementRef, r.item, takes[i].product)
			outcome = replan
		case contended:
			if outcome == placed {
				outcome = contended
			}
		case failed:
			outcome, takeErr = failed, r.err
		}
		for _, h := range r.stale {
			stale = append(stale, staleHold{productID: takes[i].productID, bucket: takes[i].Bucket, hold: h})
		}
	}
	defer s.settleAll(ctx, stale)
	if outcome != placed {
		// A take refused by its condition, contention or throttling did
		// not apply; those that applied, or may have (failed), are given
		// back, each only if its hold is there. Refused takes are not
		// tried again: on a bucket that throttles, every write counts.
		var back []heldTake
		for i, r := range results {
			if r.outcome == placed || r.outcome == failed {
				back = append(back, takes[i])
			}
		}
		s.giveBackAll(ctx, back)
		if outcome == failed {
			return failed, fmt.Errorf("place order %s: %w", o.OrderID, takeErr)
		}
		return outcome, nil
	}
	if s.now().Sub(at) > stock.OrderWindow {
		s.giveBackAll(ctx, takes)
		return failed, unavailable(fmt.Errorf("place order %s: its stock was taken %v ago", o.OrderID, s.now().Sub(at)))
	}
	outcome, err, unknown := s.writeOrder(ctx, o, tx)
	switch {
	case outcome == placed:
		eachTake(ctx, takes, s.release)
	case unknown:
		// Not known whether the order was written: its holds stay, and
		// whoever finds them stale settles them from the order table.
	default:
		s.giveBackAll(ctx, takes)
	}
	return outcome, err
}

// writeOrder writes the order and what goes with it (tx without its
// decrements): a conditional put when the order goes alone, else a
// transaction. unknown: the call failed in a way that leaves unknown
// whether the order was written.
func (s *Store) writeOrder(ctx context.Context, o orders.Order, tx *placement) (_ commitOutcome, _ error, unknown bool) {
	if tx.claim < 0 && tx.cart < 0 {
		put := tx.actions[tx.order].Put
		_, err := s.db.PutItem(ctx, &dynamodb.PutItemInput{
			TableName: aws.String(s.t.Orders), Item: put.Item,
			ConditionExpression: put.ConditionExpression, ExpressionAttributeNames: put.ExpressionAttributeNames,
		})
		var ccf *types.ConditionalCheckFailedException
		switch {
		case err == nil, errors.As(err, &ccf):
			// A fresh id's item exists only as an earlier try of this put.
			return placed, nil, false
		case busy(err):
			return contended, nil, false
		}
		return failed, fmt.Errorf("place order %s: %w", o.OrderID, unknownAsUnavailable(err)), true
	}
	var acts []types.TransactWriteItem
	claim, cart := -1, -1
	for i, a := range tx.actions {
		switch {
		case tx.isDecrement(i):
			continue
		case i == tx.claim:
			claim = len(acts)
		case i == tx.cart:
			cart = len(acts)
		}
		acts = append(acts, a)
	}
	_, err := s.db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: acts})
	if err == nil {
		return placed, nil, false
	}
	c, ok := cancelled(err)
	switch {
	case !ok:
		return failed, fmt.Errorf("place order %s: %w", o.OrderID, unknownAsUnavailable(err)), true
	case c.failed(claim):
		return failed, ErrKeyUsed, false
	case c.failed(cart):
		return replan, nil, false // the cart changed since the round read it
	case c.retryable():
		return contended, nil, false
	}
	return failed, fmt.Errorf("place order %s: cancelled %v: %w", o.OrderID, c.codes, err), false
}

// release removes a written order's hold from its bucket (if the bucket
// still exists). A release that fails leaves the hold to be settled stale.
func (s *Store) release(ctx context.Context, t heldTake) error {
	e := mustBuild(expression.NewBuilder().
		WithUpdate(expression.Delete(expression.Name(holdsAttr), expression.Value(holdSet(t.hold)))).
		WithCondition(expression.AttributeExists(expression.Name("bucketId"))))
	_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(s.t.ProductStock), Key: bucketKey(t.productID, t.Bucket),
		UpdateExpression: e.Update(), ConditionExpression: e.Condition(),
		ExpressionAttributeNames: e.Names(), ExpressionAttributeValues: e.Values(),
	})
	var ccf *types.ConditionalCheckFailedException
	if err != nil && !errors.As(err, &ccf) {
		return fmt.Errorf("release hold on %s: %w", bucketID(t.productID, t.Bucket), err)
	}
	return nil
}

// giveBack returns a take's units to its bucket and removes its hold, if
// the bucket holds it; a respread that lowered the number of buckets moved
// the holds of the buckets it dropped to bucket 0, so it is looked for
// there next. It reports whether the units went back.
func (s *Store) giveBack(ctx context.Context, t heldTake) (bool, error) {
	where := []int{t.Bucket}
	if t.Bucket != 0 {
		where = append(where, 0)
	}
	for _, i := range where {
		e := mustBuild(expression.NewBuilder().
			WithUpdate(expression.Add(expression.Name("units"), expression.Value(t.hold.Units)).
				Add(expression.Name("version"), expression.Value(1)).
				Delete(expression.Name(holdsAttr), expression.Value(holdSet(t.hold)))).
			WithCondition(expression.Contains(expression.Name(holdsAttr), t.hold.String())))
		_, err := s.db.UpdateItem(context.WithoutCancel(ctx), &dynamodb.UpdateItemInput{
			TableName: aws.String(s.t.ProductStock), Key: bucketKey(t.productID, i),
			UpdateExpression: e.Update(), ConditionExpression: e.Condition(),
			ExpressionAttributeNames: e.Names(), ExpressionAttributeValues: e.Values(),
		})
		var ccf *types.ConditionalCheckFailedException
		switch {
		case err == nil:
			return true, nil
		case !errors.As(err, &ccf):
			return false, fmt.Errorf("give back %d of %s: %w", t.hold.Units, bucketID(t.productID, i), err)
		}
	}
	return false, nil
}

// giveBackAll gives back every take of an order that did not go through.
// One that fails leaves its hold to be settled stale.
func (s *Store) giveBackAll(ctx context.Context, takes []heldTake) {
	if len(takes) == 0 {
		return
	}
	eachTake(ctx, takes, func(ctx context.Context, t heldTake) error {
		_, err := s.giveBack(ctx, t)
		return err
	})
}

// heldUnits is the units of the young holds of buckets (stock.Held) whose
// orders are not written: units that come back if those orders fail. A
// hold whose order is written is sold, however long its release takes (a
// release throttled on a sold-out bucket leaves it a while).
func (s *Store) heldUnits(ctx context.Context, bs []bucket) (int64, error) {
	var young []stock.Hold
	for _, raw := range holdsOfAll(bs) {
		if h, err := stock.ParseHold(raw); err == nil && stock.Held([]string{raw}, s.now()) > 0 {
			young = append(young, h)
		}
	}
	if len(young) == 0 {
		return 0, nil
	}
	written := map[string]bool{}
	for start := 0; start < len(young); start += 100 {
		var keys []map[string]types.AttributeValue
		for _, h := range young[start:min(start+100, len(young))] {
			keys = append(keys, orderKey(h.UserID, h.OrderID))
		}
		req := map[string]types.KeysAndAttributes{s.t.Orders: {Keys: keys, ConsistentRead: aws.Bool(true), ProjectionExpression: aws.String("orderId")}}
		err := s.batchGet(ctx, "read held orders", req, func(_ string, it map[string]types.AttributeValue) error {
			if v, ok := it["orderId"].(*types.AttributeValueMemberS); ok {
				written[v.Value] = true
			}
			return nil
		})
		if err != nil {
			return 0, err
		}
	}
	var n int64
	for _, h := range young {
		if !written[h.OrderID] {
			n += h.Units
		}
	}
	return n, nil
}

// staleHold is a stale hold found on bucket bucket of a product.
type staleHold struct {
	productID string
	bucket    int
	hold      stock.Hold
}

// Settled counts what settling stale holds did.
type Settled struct {
	// Released: the order exists, its hold is removed. Returned: it does
	// not, its units went back (Units in all).
	Released, Returned int
	Units              int64
}

// settle settles one stale hold from the order table.
func (s *Store) settle(ctx context.Context, h staleHold, into *Settled) error {
	t := heldTake{decrementRef: decrementRef{productID: h.productID, Take: stock.Take{Bucket: h.bucket, Units: h.hold.Units}}, hold: h.hold}
	_, err := s.getOrder(ctx, h.hold.UserID, h.hold.OrderID, true)
	switch {
	case err == nil:
		if err := s.release(ctx, t); err != nil {
			return err
		}
		into.Released++
		return nil
	case errcode.Of(err) != errcode.NotFound:
		return fmt.Errorf("settle hold of order %s: %w", h.hold.OrderID, err)
	}
	back, err := s.giveBack(ctx, t)
	if back {
		into.Returned++
		into.Units += h.hold.Units
	}
	return err
}

// settleAll settles the stale holds an order's takes found, after the
// order's own writes; one that fails is found again later.
func (s *Store) settleAll(ctx context.Context, hs []staleHold) {
	var into Settled
	for _, h := range hs {
		_ = s.settle(context.WithoutCancel(ctx), h, &into)
	}
}

// SettleStaleHolds settles the stale holds of every bucket of product id
// (the audit's repair, docs/operations.md): reads the buckets consistently
// and settles each hold older than stock.StaleAfter from the order table.
func (s *Store) SettleStaleHolds(ctx context.Context, id string) (Settled, error) {
	var into Settled
	p, err := s.getProduct(ctx, id, true)
	if err != nil {
		return into, err
	}
	read, err := s.readBuckets(ctx, map[string]int{id: bucketsOf(p)}, true)
	if err != nil {
		return into, err
	}
	for i, b := range read[id] {
		for _, raw := range b.Holds {
			h, err := stock.ParseHold(raw)
			if err != nil || !h.Stale(s.now()) {
				continue
			}
			if err := s.settle(ctx, staleHold{productID: id, bucket: i, hold: h}, &into); err != nil {
				return into, err
			}
		}
	}
	return into, nil
}
