package store

import (
	"context"
	"fmt"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/shopstream/shopstream/shared/products"
	"github.com/shopstream/shopstream/shared/shapes"
	"github.com/shopstream/shopstream/shared/stock"
)

// A product's stock lives in N bucket items of the product-stock table,
// "<productId>#<i>" for i in 0..N-1, each on its own partition key (write
// sharding, seed 003). A sale takes its units from one bucket, or from
// several when no single bucket has them, each decrement conditional on the
// bucket holding what it takes; a product is short of stock only when a
// read of all its buckets as of one instant finds less than the quantity
// (a consistent BatchGetItem of them can straddle a respread, a sale or a
// restock, and count less than the product ever held). Each
// bucket carries a copy of the product's price and name, which a sale
// checks in the same condition, so an order never writes the catalog item.
//
// A product's version is its catalog item's plus its buckets': a sale or a
// restock adds 1 to its bucket's, every other write 1 to the catalog's, so
// the version (and the ETag) moves with every write, stock included, by 1
// per write, and If-Match covers the sales since the read.

// bucket is one stock bucket item.
type bucket struct {
	BucketID   string `dynamodbav:"bucketId"`
	ProductID  string `dynamodbav:"productId"`
	Index      int    `dynamodbav:"bucket"`
	Units      int64  `dynamodbav:"units"`
	PriceCents int64  `dynamodbav:"priceCents"`
	Name       string `dynamodbav:"name"`
	Version    int64  `dynamodbav:"version"`
	Shape      int    `dynamodbav:"shape,omitempty"`
	// Of is the number of buckets the product had when this bucket was
	// written whole (a creation, a respread); 0 when written by a release
	// before 0.16.0. A page that reads a catalog item saying otherwise read
	// the two from either side of a respread.
	Of int `dynamodbav:"of,omitempty"`
	// At stamps, on every bucket of the product, the last write of the
	// catalog that added units to its buckets: a creation, a respread or,
	// since 0.22.0, a PATCH of a positive stockDelta, each with the
	// catalog version it wrote; 0 when written by a release before 0.17.0.
	// Buckets read with different ones were read from either side of such
	// a write, and may count a unit twice (a sale of bucket 0 then a
	// restock of bucket 1, read as bucket 0 before and bucket 1 after).
	// A cancel gives its units back to one bucket without a stamp
	// (CancelOrder): a read straddling a sale and a cancel within its own
	// milliseconds can show the cancelled units twice.
	At int64 `dynamodbav:"at,omitempty"`
}

// straddles says whether b, read beside a catalog item of n buckets, was
// written by a respread that catalog item does not know of, or the
// reverse: the two were read from either side of a respread.
func (b bucket) straddles(n int) bool { return b.Of != 0 && b.Of != n }

// straddled says whether bs, the buckets of a product whose catalog item
// read says it has n, may have been read from either side of a write that
// added units (stock.Straddles; a missing bucket, or one written by a
// release before 0.17.0, reads as a stamp of its own).
func straddled(bs []bucket, n int) bool {
	stamps := make([]stock.Stamp, len(bs))
	for i, b := range bs {
		stamps[i] = stock.Stamp{Of: b.Of, At: b.At}
	}
	return stock.Straddles(stamps, n)
}

func bucketID(productID string, i int) string { return productID + "#" + strconv.Itoa(i) }

func bucketKey(productID string, i int) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{"bucketId": &types.AttributeValueMemberS{Value: bucketID(productID, i)}}
}

// bucketsOf is the number of buckets of p (1 for a product written before
// buckets had a number).
func bucketsOf(p products.Product) int { return max(p.StockBuckets, 1) }

// readBuckets reads every bucket of the products (id → number of buckets);
// a missing bucket reads as empty. The result maps a product to its
// buckets, in bucket order.
func (s *Store) readBuckets(ctx context.Context, counts map[string]int, consistent bool) (map[string][]bucket, error) {
	out := make(map[string][]bucket, len(counts))
	var keys []map[string]types.AttributeValue
	for id, n := range counts {
		out[id] = make([]bucket, n)
		for i := 0; i < n; i++ {
			keys = append(keys, bucketKey(id, i))
		}
	}
	for start := 0; start < len(keys); start += 100 {
		req := map[string]types.KeysAndAttributes{s.t.ProductStock: {
			Keys: keys[start:min(start+100, len(keys))], ConsistentRead: aws.Bool(consistent),
		}}
		err := s.batchGet(ctx, "read stock", req, func(_ string, it map[string]types.AttributeValue) error {
			var b bucket
			if err := attributevalue.UnmarshalMap(it, &b); err != nil {
				return fmt.Errorf("read stock: %w", err)
			}
			if bs, ok := out[b.ProductID]; ok && b.Index < len(bs) {
				bs[b.Index] = b
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// readAtOnce reads the buckets of product id as of one instant, and its
// catalog item with them when withCatalog: TransactGetItems is serializable
// against transactions, where a BatchGetItem's reads of different items are
// each read-committed and may straddle a respread, a sale and a restock, or
// the move of a catalog item's stock into its bucket, and so count a unit
// twice (buckets [5,0] respread to [3,2] read as 5+2). A missing bucket
// reads as empty; a missing catalog item as nil. Cancelled by a transaction
// in progress on one of them, it backs off and reads again.
func (s *Store) readAtOnce(ctx context.Context, id string, n int, withCatalog bool) (map[string]types.AttributeValue, []bucket, error) {
	var gets []types.TransactGetItem
	if withCatalog {
		gets = append(gets, types.TransactGetItem{Get: &types.Get{TableName: aws.String(s.t.Products), Key: productKey(id)}})
	}
	first := len(gets)
	for i := range n {
		gets = append(gets, types.TransactGetItem{Get: &types.Get{TableName: aws.String(s.t.ProductStock), Key: bucketKey(id, i)}})
	}
	for attempt := 1; ; attempt++ {
		out, err := s.db.TransactGetItems(ctx, &dynamodb.TransactGetItemsInput{TransactItems: gets})
		if err == nil {
			var catalog map[string]types.AttributeValue
			if withCatalog {
				catalog = out.Responses[0].Item
			}
			bs := make([]bucket, n)
			for i, r := range out.Responses[first:] {
				if r.Item == nil {
					continue
				}
				if err := attributevalue.UnmarshalMap(r.Item, &bs[i]); err != nil {
					return nil, nil, fmt.Errorf("read stock of %s: %w", id, err)
				}
			}
			return catalog, bs, nil
		}
		if c, ok := cancelled(err); !ok || !c.retryable() {
			return nil, nil, fmt.Errorf("read stock of %s: %w", id, classify(err))
		}
		if attempt >= s.cfg.MaxAttempts {
			return nil, nil, contention("read stock")
		}
		if err := s.backoff(ctx, attempt); err != nil {
			return nil, nil, err
		}
	}
}

// productAtOnce reads product id's catalog item and all its buckets as of
// one instant (readAtOnce), from n buckets; when the catalog item read says
// another number (a respread between the reads), it reads again with that
// number. ok false: the product is gone.
func (s *Store) productAtOnce(ctx context.Context, id string, n int) (p products.Product, bs []bucket, ok bool, err error) {
	for range 3 {
		catalog, read, err := s.readAtOnce(ctx, id, n, true)
		if err != nil {
			return products.Product{}, nil, false, err
		}
		if catalog == nil {
			return products.Product{}, nil, false, nil
		}
		if p, err = s.decodeProduct(ctx, catalog); err != nil {
			return products.Product{}, nil, false, fmt.Errorf("read stock of %s: %w", id, err)
		}
		if bucketsOf(p) == n {
			return p, read, true, nil
		}
		n = bucketsOf(p)
	}
	return products.Product{}, nil, false, contention("read stock of " + id)
}

// withStock fills in the stock totals of ps from their buckets, and adds
// their buckets' versions to the products'.
func (s *Store) withStock(ctx context.Context, ps []products.Product, consistent bool) error {
	if len(ps) == 0 {
		return nil
	}
	counts := make(map[string]int, len(ps))
	for _, p := range ps {
		counts[p.ProductID] = bucketsOf(p)
	}
	read, err := s.readBuckets(ctx, counts, consistent)
	if err != nil {
		return err
	}
	for i := range ps {
		bs := read[ps[i].ProductID]
		if straddled(bs, bucketsOf(ps[i])) || movingIn(ps[i], bs) {
			// Read again as of one instant, the catalog item with its
			// buckets: rare (a respread or a restock beside the read, a
			// product's stock being moved into its buckets), 2 RRU an item.
			p, at, ok, err := s.productAtOnce(ctx, ps[i].ProductID, bucketsOf(ps[i]))
			switch {
			case err != nil:
				return err
			case !ok:
				// Deleted since the list's read: it holds nothing.
				ps[i].Stock = 0
				continue
			}
			ps[i], bs = p, at
		}
		ps[i].Stock = stock.Sum(unitsOf(bs)) + catalogStock(ps[i])
		ps[i].Version += versions(bs)
	}
	return nil
}

// movingIn says whether p, read with its stock still on its catalog item
// (shape 1), has buckets too: the catalog item was read from before the
// move of its stock into its buckets (make migrate, or its first change)
// and the buckets from after, and the two would count the units twice.
func movingIn(p products.Product, bs []bucket) bool {
	if p.CatalogStock == nil {
		return false
	}
	for _, b := range bs {
		if b.BucketID != "" {
			return true
		}
	}
	return false
}

// catalogStock is the stock p's catalog item still holds (shape 1: a
// product written before stock buckets, not yet migrated); 0 for shape 2.
func catalogStock(p products.Product) int64 {
	if p.CatalogStock == nil {
		return 0
	}
	return *p.CatalogStock
}

// onCatalog is the bucket index of a take from the catalog item's own
// stock (shape 1).
const onCatalog = -1

func unitsOf(bs []bucket) []int64 {
	out := make([]int64, len(bs))
	for i, b := range bs {
		out[i] = b.Units
	}
	return out
}

func versions(bs []bucket) int64 {
	var v int64
	for _, b := range bs {
		v += b.Version
	}
	return v
}

// decrement is the action that takes t.Units from a bucket of p, on the
// condition that it holds them and still carries the price and name the
// caller read; a take onCatalog is the same on the catalog item's stock,
// as releases before stock buckets took it.
func (s *Store) decrement(p products.Product, t stock.Take) types.TransactWriteItem {
	if t.Bucket == onCatalog {
		upd := expression.Set(expression.Name("stock"), expression.Name("stock").Minus(expression.Value(t.Units))).
			Add(expression.Name("version"), expression.Value(1))
		cond := expression.AttributeExists(expression.Name("productId")).
			And(expression.Name("stock").GreaterThanEqual(expression.Value(t.Units))).
			And(expression.Name("priceCents").Equal(expression.Value(p.PriceCents))).
			And(expression.Name("name").Equal(expression.Value(p.Name)))
		e := mustBuild(expression.NewBuilder().WithUpdate(upd).WithCondition(cond))
		return types.TransactWriteItem{Update: &types.Update{
			TableName: aws.String(s.t.Products), Key: productKey(p.ProductID),
			UpdateExpression: e.Update(), ConditionExpression: e.Condition(),
			ExpressionAttributeNames: e.Names(), ExpressionAttributeValues: e.Values(),
			ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
		}}
	}
	upd := expression.Set(expression.Name("units"), expression.Name("units").Minus(expression.Value(t.Units))).
		Add(expression.Name("version"), expression.Value(1))
	cond := expression.AttributeExists(expression.Name("bucketId")).
		And(expression.Name("units").GreaterThanEqual(expression.Value(t.Units))).
		And(expression.Name("priceCents").Equal(expression.Value(p.PriceCents))).
		And(expression.Name("name").Equal(expression.Value(p.Name)))
	e := mustBuild(expression.NewBuilder().WithUpdate(upd).WithCondition(cond))
	return types.TransactWriteItem{Update: &types.Update{
		TableName: aws.String(s.t.ProductStock), Key: bucketKey(p.ProductID, t.Bucket),
		UpdateExpression: e.Update(), ConditionExpression: e.Condition(),
		ExpressionAttributeNames: e.Names(), ExpressionAttributeValues: e.Values(),
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}}
}

// restock is the action that adds units to bucket i of product id, if the
// bucket exists (a deleted product's units are not restocked); onCatalog,
// to the catalog item's stock, if it still holds stock (a migration since
// the read fails it, and the caller reads again).
func (s *Store) restock(id string, i int, units int64) types.TransactWriteItem {
	if i == onCatalog {
		e := mustBuild(expression.NewBuilder().
			WithUpdate(expression.Set(expression.Name("stock"), expression.Name("stock").Plus(expression.Value(units))).Add(expression.Name("version"), expression.Value(1))).
			WithCondition(expression.AttributeExists(expression.Name("stock"))))
		return types.TransactWriteItem{Update: &types.Update{
			TableName: aws.String(s.t.Products), Key: productKey(id),
			UpdateExpression: e.Update(), ConditionExpression: e.Condition(),
			ExpressionAttributeNames: e.Names(), ExpressionAttributeValues: e.Values(),
		}}
	}
	upd := expression.Add(expression.Name("units"), expression.Value(units)).Add(expression.Name("version"), expression.Value(1))
	e := mustBuild(expression.NewBuilder().WithUpdate(upd).
		WithCondition(expression.AttributeExists(expression.Name("bucketId"))))
	return types.TransactWriteItem{Update: &types.Update{
		TableName: aws.String(s.t.ProductStock), Key: bucketKey(id, i),
		UpdateExpression: e.Update(), ConditionExpression: e.Condition(),
		ExpressionAttributeNames: e.Names(), ExpressionAttributeValues: e.Values(),
	}}
}

// putBucket is the action that writes bucket i of p whole with the given
// units and version, as written by the write of catalog version at, on the
// condition that it is as it was read (absent
// when was is nil).
func (s *Store) putBucket(p products.Product, at int64, i int, units, version int64, was *bucket) (types.TransactWriteItem, error) {
	item, err := attributevalue.MarshalMap(bucket{
		BucketID: bucketID(p.ProductID, i), ProductID: p.ProductID, Index: i,
		Units: units, PriceCents: p.PriceCents, Name: p.Name, Version: version, Shape: shapes.StockBucket, Of: bucketsOf(p), At: at,
	})
	if err != nil {
		return types.TransactWriteItem{}, err
	}
	cond := expression.AttributeNotExists(expression.Name("bucketId"))
	if was != nil && was.BucketID != "" {
		cond = expression.Name("version").Equal(expression.Value(was.Version)).And(expression.Name("units").Equal(expression.Value(was.Units)))
	}
	e := mustBuild(expression.NewBuilder().WithCondition(cond))
	return types.TransactWriteItem{Put: &types.Put{
		TableName: aws.String(s.t.ProductStock), Item: item,
		ConditionExpression: e.Condition(), ExpressionAttributeNames: e.Names(), ExpressionAttributeValues: e.Values(),
	}}, nil
}

// deleteBucket removes bucket i of product id, on the condition that it is
// at the version it was read at (nil: whatever it holds).
func (s *Store) deleteBucket(id string, i int, was *bucket) types.TransactWriteItem {
	d := &types.Delete{TableName: aws.String(s.t.ProductStock), Key: bucketKey(id, i)}
	if was != nil && was.BucketID != "" {
		e := mustBuild(expression.NewBuilder().WithCondition(expression.Name("version").Equal(expression.Value(was.Version))))
		d.ConditionExpression, d.ExpressionAttributeNames, d.ExpressionAttributeValues = e.Condition(), e.Names(), e.Values()
	}
	return types.TransactWriteItem{Delete: d}
}

// checkBucket is the action that checks that bucket i of product id is at
// the version it was read at.
func (s *Store) checkBucket(id string, i int, was bucket) types.TransactWriteItem {
	e := mustBuild(expression.NewBuilder().WithCondition(expression.Name("version").Equal(expression.Value(was.Version))))
	return types.TransactWriteItem{ConditionCheck: &types.ConditionCheck{
		TableName: aws.String(s.t.ProductStock), Key: bucketKey(id, i),
		ConditionExpression: e.Condition(), ExpressionAttributeNames: e.Names(), ExpressionAttributeValues: e.Values(),
	}}
}

// randomBucket draws a bucket of n.
func (s *Store) randomBucket(n int) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rnd.IntN(n)
}
