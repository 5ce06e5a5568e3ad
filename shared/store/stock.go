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
)

// A product's stock lives in N bucket items of the product-stock table,
// "<productId>#<i>" for i in 0..N-1, each on its own partition key (write
// sharding, seed 003). A sale takes its units from one bucket, or from
// several when no single bucket has them, each decrement conditional on the
// bucket holding what it takes; a product is short of stock only when a
// consistent read of all its buckets finds less than the quantity. Each
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
}

func bucketID(productID string, i int) string { return productID + "#" + strconv.Itoa(i) }

func bucketKey(productID string, i int) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{"bucketId": &types.AttributeValueMemberS{Value: bucketID(productID, i)}}
}

// bucketsOf is the number of buckets of p (1 for a product written before
// buckets had a number).
func bucketsOf(p products.Product) int { return max(p.StockBuckets, 1) }

// spread splits total units over n buckets as evenly as can be, the
// remainder to the first buckets.
func spread(total int64, n int) []int64 {
	out := make([]int64, n)
	for i := range out {
		out[i] = total / int64(n)
		if int64(i) < total%int64(n) {
			out[i]++
		}
	}
	return out
}

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
		for attempt := 1; len(req) > 0; attempt++ {
			res, err := s.db.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{RequestItems: req})
			if err != nil {
				return nil, fmt.Errorf("read stock: %w", classify(err))
			}
			for _, it := range res.Responses[s.t.ProductStock] {
				var b bucket
				if err := attributevalue.UnmarshalMap(it, &b); err != nil {
					return nil, fmt.Errorf("read stock: %w", err)
				}
				if bs, ok := out[b.ProductID]; ok && b.Index < len(bs) {
					bs[b.Index] = b
				}
			}
			req = res.UnprocessedKeys
			if len(req) > 0 {
				if attempt >= s.cfg.MaxAttempts {
					return nil, contention("read stock")
				}
				if err := s.backoff(ctx, attempt); err != nil {
					return nil, err
				}
			}
		}
	}
	return out, nil
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
		ps[i].Stock = sum(unitsOf(bs))
		ps[i].Version += versions(bs)
	}
	return nil
}

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

func sum(units []int64) int64 {
	var t int64
	for _, u := range units {
		t += u
	}
	return t
}

// take is a decrement of one bucket.
type take struct {
	bucket int
	units  int64
}

// plan chooses the buckets a quantity is taken from, given their units: one
// bucket that holds it all, picked at random among those that do (start is
// the random draw), else the fullest buckets until it is covered; nil when
// the buckets together hold less.
func plan(units []int64, quantity int64, start int) []take {
	if sum(units) < quantity {
		return nil
	}
	n := len(units)
	for k := 0; k < n; k++ {
		i := (start + k) % n
		if units[i] >= quantity {
			return []take{{bucket: i, units: quantity}}
		}
	}
	order := make([]int, n)
	for i := range order {
		order[i] = i
	}
	// Fullest first: the fewest buckets, so the fewest contenders.
	for i := 1; i < n; i++ {
		for j := i; j > 0 && units[order[j]] > units[order[j-1]]; j-- {
			order[j], order[j-1] = order[j-1], order[j]
		}
	}
	var takes []take
	left := quantity
	for _, i := range order {
		if left == 0 {
			break
		}
		if u := min(units[i], left); u > 0 {
			takes = append(takes, take{bucket: i, units: u})
			left -= u
		}
	}
	return takes
}

// decrement is the action that takes t.units from a bucket of p, on the
// condition that it holds them and still carries the price and name the
// caller read.
func (s *Store) decrement(p products.Product, t take) types.TransactWriteItem {
	upd := expression.Set(expression.Name("units"), expression.Name("units").Minus(expression.Value(t.units))).
		Add(expression.Name("version"), expression.Value(1))
	cond := expression.AttributeExists(expression.Name("bucketId")).
		And(expression.Name("units").GreaterThanEqual(expression.Value(t.units))).
		And(expression.Name("priceCents").Equal(expression.Value(p.PriceCents))).
		And(expression.Name("name").Equal(expression.Value(p.Name)))
	e := mustBuild(expression.NewBuilder().WithUpdate(upd).WithCondition(cond))
	return types.TransactWriteItem{Update: &types.Update{
		TableName: aws.String(s.t.ProductStock), Key: bucketKey(p.ProductID, t.bucket),
		UpdateExpression: e.Update(), ConditionExpression: e.Condition(),
		ExpressionAttributeNames: e.Names(), ExpressionAttributeValues: e.Values(),
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}}
}

// restock is the action that adds units to bucket i of product id, if the
// bucket exists (a deleted product's units are not restocked).
func (s *Store) restock(id string, i int, units int64) types.TransactWriteItem {
	e := mustBuild(expression.NewBuilder().
		WithUpdate(expression.Add(expression.Name("units"), expression.Value(units)).Add(expression.Name("version"), expression.Value(1))).
		WithCondition(expression.AttributeExists(expression.Name("bucketId"))))
	return types.TransactWriteItem{Update: &types.Update{
		TableName: aws.String(s.t.ProductStock), Key: bucketKey(id, i),
		UpdateExpression: e.Update(), ConditionExpression: e.Condition(),
		ExpressionAttributeNames: e.Names(), ExpressionAttributeValues: e.Values(),
	}}
}

// putBucket is the action that writes bucket i of p whole with the given
// units and version, on the condition that it is as it was read (absent
// when was is nil).
func (s *Store) putBucket(p products.Product, i int, units, version int64, was *bucket) (types.TransactWriteItem, error) {
	item, err := attributevalue.MarshalMap(bucket{
		BucketID: bucketID(p.ProductID, i), ProductID: p.ProductID, Index: i,
		Units: units, PriceCents: p.PriceCents, Name: p.Name, Version: version,
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
