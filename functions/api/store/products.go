package store

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/shopstream/shopstream/shared/errcode"
	"github.com/shopstream/shopstream/shared/facts"
	"github.com/shopstream/shopstream/shared/products"
	"github.com/shopstream/shopstream/shared/stock"
	"github.com/shopstream/shopstream/shared/tables"
)

func productKey(id string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{"productId": &types.AttributeValueMemberS{Value: id}}
}

// productIDOf is the productId an item holds, for a log line.
func productIDOf(item map[string]types.AttributeValue) string {
	if v, ok := item["productId"].(*types.AttributeValueMemberS); ok {
		return v.Value
	}
	return ""
}

func (s *Store) decodeProduct(ctx context.Context, item map[string]types.AttributeValue) (products.Product, error) {
	var p products.Product
	if err := attributevalue.UnmarshalMap(s.readable(ctx, facts.Product, "productId", productIDOf(item), item), &p); err != nil {
		return products.Product{}, err
	}
	// A catalog item of shape 1 has no stockBuckets: its stock is one
	// bucket's worth (the catalog item's own, or bucket 0 once moved).
	p.StockBuckets = bucketsOf(p)
	p.Derive()
	return p, nil
}

// CreateProduct adds a product with a new id, its stock spread over its
// buckets, in one transaction.
func (s *Store) CreateProduct(ctx context.Context, n products.New) (products.Product, error) {
	now := s.stamp()
	p := products.Product{
		ProductID: s.cfg.NewID(), Name: strings.TrimSpace(n.Name), Description: n.Description,
		Category: n.Category, PriceCents: *n.PriceCents, Stock: *n.Stock, StockBuckets: 1,
		CreatedAt: now, UpdatedAt: now, Version: 1, Shape: products.Shape,
	}
	if n.StockBuckets != nil {
		p.StockBuckets = *n.StockBuckets
	}
	item, err := attributevalue.MarshalMap(p)
	if err != nil {
		return products.Product{}, fmt.Errorf("create product: %w", err)
	}
	cond := notExists("productId")
	actions := []types.TransactWriteItem{{Put: &types.Put{
		TableName: aws.String(s.t.Products), Item: item,
		ConditionExpression: cond.Condition(), ExpressionAttributeNames: cond.Names(),
	}}}
	for i, units := range stock.Spread(p.Stock, p.StockBuckets) {
		put, err := s.putBucket(p, p.Version, i, units, 0, nil)
		if err != nil {
			return products.Product{}, fmt.Errorf("create product %s: %w", p.ProductID, err)
		}
		actions = append(actions, put)
	}
	if err := s.transact(ctx, "create product "+p.ProductID, actions); err != nil {
		return products.Product{}, err
	}
	// This instance's next pages of it read strongly consistent for a
	// while: an eventually consistent read may not find it yet.
	s.catalogs.forget(p.ProductID)
	return p, nil
}

// transact runs a transaction that no condition of the caller's can fail,
// retrying cancellations by contention with backoff.
func (s *Store) transact(ctx context.Context, op string, actions []types.TransactWriteItem) error {
	for attempt := 1; attempt <= s.cfg.MaxAttempts; attempt++ {
		_, err := s.db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: actions})
		if err == nil {
			return nil
		}
		c, ok := cancelled(err)
		if !ok || !c.retryable() {
			return fmt.Errorf("%s: %w", op, classify(err))
		}
		if err := s.backoff(ctx, attempt); err != nil {
			return err
		}
	}
	return contention(op)
}

// GetProduct returns product id with the total of its stock buckets.
// Codes: NotFound.
func (s *Store) GetProduct(ctx context.Context, id string) (products.Product, error) {
	// A one-bucket product whose page this instance answered within the
	// cache's TTL: its bucket first, one GetItem as the first release's page
	// was. While the bucket is as it was read with the catalog item, the
	// page is the one answered then, its stock unchanged. A bucket that
	// moved, or is gone, sends the page to the full read below, which reads
	// both items in one request as before (a second read of the catalog item
	// after the bucket would widen the window in which the two disagree).
	//
	// Within the repeat window of a read that found the bucket as it was
	// (or, for a product of several buckets, of the read of them all), the
	// same page again, with no read: a sale made on another instance shows
	// at most that much later (a public read is eventually consistent; this
	// instance's own writes and sales show at once).
	c, cached := s.catalogs.get(id)
	if cached && s.catalogs.fresh(c) {
		return c.page(), nil
	}
	if cached && !c.whole {
		readAt := time.Now()
		out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(s.t.ProductStock), Key: bucketKey(id, 0),
			ConsistentRead: aws.Bool(s.catalogs.ownRecent(id))})
		if err != nil {
			return products.Product{}, fmt.Errorf("get product %s: %w", id, classify(err))
		}
		if out.Item != nil {
			var b bucket
			if err := attributevalue.UnmarshalMap(out.Item, &b); err != nil {
				return products.Product{}, fmt.Errorf("get product %s: %w", id, err)
			}
			if b == c.b {
				s.catalogs.confirm(id, b, readAt)
				p := c.p
				p.Stock, p.Version = b.Units, p.Version+b.Version
				return p, nil
			}
		}
		s.catalogs.drop(id)
	}
	// One round trip for a product of one bucket, the most common: its
	// catalog item and bucket 0 in one BatchGetItem, each read eventually
	// consistent, as a GetItem of a product that held its own stock was.
	// After this instance's own write of the product, strongly consistent,
	// so that the write shows here at once.
	readAt, gen, own := time.Now(), s.catalogs.generation(), s.catalogs.ownRecent(id)
	catalog, first, err := s.readPair(ctx, id, own)
	if err != nil {
		return products.Product{}, fmt.Errorf("get product %s: %w", id, err)
	}
	if catalog == nil {
		return products.Product{}, errcode.Errorf(errcode.NotFound, "product %s not found", id)
	}
	p, err := s.decodeProduct(ctx, catalog)
	if err != nil {
		return products.Product{}, fmt.Errorf("get product %s: %w", id, err)
	}
	// A product whose stock is in buckets has its bucket 0 from its
	// creation on, written in the same transaction: a catalog item read
	// without it is a replica behind (a product just created) or ahead (one
	// being deleted). Shown as it is, the page would say stock 0 under the
	// version of the real page, and its ETag would keep caches on "out of
	// stock" with 304s. Read both again, strongly consistent.
	if !own && first == nil && p.CatalogStock == nil {
		if catalog, first, err = s.readPair(ctx, id, true); err != nil {
			return products.Product{}, fmt.Errorf("get product %s: %w", id, err)
		}
		if catalog == nil {
			return products.Product{}, errcode.Errorf(errcode.NotFound, "product %s not found", id)
		}
		if p, err = s.decodeProduct(ctx, catalog); err != nil {
			return products.Product{}, fmt.Errorf("get product %s: %w", id, err)
		}
	}
	n := bucketsOf(p)
	moving := p.CatalogStock != nil && first != nil
	if n == 1 && !moving {
		var b bucket
		if first != nil {
			if err := attributevalue.UnmarshalMap(first, &b); err != nil {
				return products.Product{}, fmt.Errorf("get product %s: %w", id, err)
			}
			if b.straddles(n) {
				return s.pageAtOnce(ctx, id, b.Of)
			}
			if p.CatalogStock == nil {
				s.catalogs.put(id, p, b, readAt, gen)
			}
		}
		p.Stock = b.Units + catalogStock(p)
		p.Version += b.Version
		return p, nil
	}
	// Several buckets, or a catalog item's stock being moved into its
	// bucket: read as of one instant, the catalog item with the buckets
	// when it may hold stock, so the total is one the product held (a unit
	// is never shown twice).
	if moving {
		// A respread between the two reads changes the number of buckets:
		// read again with the number the consistent read found.
		for range 3 {
			catalog, bs, err := s.readAtOnce(ctx, id, n, true)
			if err != nil {
				return products.Product{}, fmt.Errorf("get product %s: %w", id, err)
			}
			if catalog == nil {
				return products.Product{}, errcode.Errorf(errcode.NotFound, "product %s not found", id)
			}
			if p, err = s.decodeProduct(ctx, catalog); err != nil {
				return products.Product{}, fmt.Errorf("get product %s: %w", id, err)
			}
			if bucketsOf(p) == n {
				p.Stock = stock.Sum(unitsOf(bs)) + catalogStock(p)
				p.Version += versions(bs)
				return p, nil
			}
			n = bucketsOf(p)
		}
		return products.Product{}, contention("get product " + id)
	}
	// The buckets in one consistent BatchGetItem, not a TransactGetItems:
	// AWS cancels a transactional read of an item an order's transaction
	// holds, and during a sale of the product orders hold its buckets
	// nearly all the time (an 8-bucket flash sale through the local stack:
	// pages took 1.8-3.8 s, BenchmarkFlashSalePage). Each item of a
	// BatchGetItem is read on its own, so the total may join buckets read
	// a few milliseconds apart. It counts a unit twice only when a write
	// added units to a bucket in between (a respread; a sale from bucket 0
	// and a restock into bucket 1), and such writes of the catalog stamp
	// all the product's buckets (bucket.At, straddled): such a read is read
	// again as of one instant. A cancel gives its units back to one bucket
	// unstamped, so a sale and a cancel inside one read's milliseconds can
	// show the cancelled units twice on that page (docs/decisions.md, "The
	// page of a product of several buckets", revisited in 0.22.0).
	read, err := s.readBuckets(ctx, map[string]int{id: n}, true)
	if err != nil {
		return products.Product{}, fmt.Errorf("get product %s: %w", id, err)
	}
	bs := read[id]
	if straddled(bs, n) {
		if bs[0].straddles(n) {
			n = bs[0].Of
		}
		return s.pageAtOnce(ctx, id, n)
	}
	catalogVersion := p.Version
	p.Stock = stock.Sum(unitsOf(bs)) + catalogStock(p)
	p.Version += versions(bs)
	s.catalogs.putPage(id, p, catalogVersion, readAt, gen)
	return p, nil
}

// pageAtOnce is the page of product id read as of one instant, from n
// buckets (productAtOnce): the page's first read joined a catalog item and
// a bucket from either side of a respread, whose total the product never
// held, under a version another page had. It is not kept in the catalog
// cache.
func (s *Store) pageAtOnce(ctx context.Context, id string, n int) (products.Product, error) {
	p, bs, ok, err := s.productAtOnce(ctx, id, n)
	switch {
	case err != nil:
		return products.Product{}, fmt.Errorf("get product %s: %w", id, err)
	case !ok:
		return products.Product{}, errcode.Errorf(errcode.NotFound, "product %s not found", id)
	}
	p.Stock = stock.Sum(unitsOf(bs)) + catalogStock(p)
	p.Version += versions(bs)
	return p, nil
}

// readPair reads product id's catalog item and its bucket 0 in one
// BatchGetItem; either is nil when the read did not find it.
func (s *Store) readPair(ctx context.Context, id string, consistent bool) (catalog, first map[string]types.AttributeValue, err error) {
	req := map[string]types.KeysAndAttributes{
		s.t.Products:     {Keys: []map[string]types.AttributeValue{productKey(id)}, ConsistentRead: aws.Bool(consistent)},
		s.t.ProductStock: {Keys: []map[string]types.AttributeValue{bucketKey(id, 0)}, ConsistentRead: aws.Bool(consistent)},
	}
	err = s.batchGet(ctx, "get product "+id, req, func(table string, it map[string]types.AttributeValue) error {
		if table == s.t.Products {
			catalog = it
		} else {
			first = it
		}
		return nil
	})
	return catalog, first, err
}

// getProduct reads the catalog item of product id (its Stock left 0).
func (s *Store) getProduct(ctx context.Context, id string, consistent bool) (products.Product, error) {
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(s.t.Products), Key: productKey(id), ConsistentRead: aws.Bool(consistent)})
	if err != nil {
		return products.Product{}, fmt.Errorf("get product %s: %w", id, classify(err))
	}
	if out.Item == nil {
		return products.Product{}, errcode.Errorf(errcode.NotFound, "product %s not found", id)
	}
	p, err := s.decodeProduct(ctx, out.Item)
	if err != nil {
		return products.Product{}, fmt.Errorf("get product %s: %w", id, err)
	}
	return p, nil
}

// PatchProduct changes the given fields of product id in one transaction
// with its stock buckets, conditional on the catalog version it read and,
// with ifMatch, on every bucket's (so a sale since the read is a 412): a
// StockDelta adds units spread over the buckets or takes them as a sale
// does; an absolute Stock or a new StockBuckets respreads the total evenly,
// each bucket conditional on how it was read, so no sale in between is lost
// or counted twice; a new name or price is copied to every bucket. Codes:
// NotFound, PreconditionFailed, Conflict (the delta would take the stock out
// of 0..products.MaxStock), Unavailable.
func (s *Store) PatchProduct(ctx context.Context, id string, p products.Patch, ifMatch *int64) (products.Product, error) {
	// This instance's next page reads the catalog again, whatever the
	// outcome (a 412 says the cached version is behind).
	defer s.catalogs.forget(id)
	for attempt := 1; attempt <= s.cfg.MaxAttempts; attempt++ {
		cur, err := s.getProduct(ctx, id, true)
		if err != nil {
			return products.Product{}, err
		}
		read, err := s.readBuckets(ctx, map[string]int{id: bucketsOf(cur)}, true)
		if err != nil {
			return products.Product{}, fmt.Errorf("patch product %s: %w", id, err)
		}
		bs := read[id]
		if ifMatch != nil && cur.Version+versions(bs) != *ifMatch {
			return products.Product{}, errcode.Errorf(errcode.PreconditionFailed, "product %s is not at version %d", id, *ifMatch)
		}
		next, actions, err := s.patchActions(cur, bs, p, ifMatch != nil)
		if err != nil {
			return products.Product{}, err
		}
		_, err = s.db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: actions})
		if err == nil {
			// A replica behind this write must not refill the cache: the
			// catalog item's own version, which the cache compares (next's
			// adds its buckets').
			s.catalogs.wrote(id, cur.Version+1)
			next.Derive()
			return next, nil
		}
		c, ok := cancelled(err)
		switch {
		case !ok:
			return products.Product{}, fmt.Errorf("patch product %s: %w", id, classify(err))
		case c.anyCondition():
			continue // the product or a bucket moved since read: read again
		case !c.retryable():
			return products.Product{}, fmt.Errorf("patch product %s: cancelled %v: %w", id, c.codes, err)
		}
		if err := s.backoff(ctx, attempt); err != nil {
			return products.Product{}, err
		}
	}
	return products.Product{}, contention("patch product")
}

// patchActions is the transaction of a patch of cur, whose buckets read bs:
// [0] the catalog item, then the buckets; every bucket is checked at its
// version when pinned. It returns the product as the transaction leaves it.
func (s *Store) patchActions(cur products.Product, bs []bucket, p products.Patch, pinned bool) (products.Product, []types.TransactWriteItem, error) {
	next := cur
	next.Version, next.UpdatedAt = cur.Version+1, s.stamp()
	upd := expression.Set(expression.Name("updatedAt"), expression.Value(next.UpdatedAt)).
		Set(expression.Name("version"), expression.Value(next.Version))
	if p.Name != nil {
		next.Name = strings.TrimSpace(*p.Name)
		upd = upd.Set(expression.Name("name"), expression.Value(next.Name))
	}
	if p.Description != nil {
		next.Description = *p.Description
		upd = upd.Set(expression.Name("description"), expression.Value(next.Description))
	}
	if p.Category != nil {
		next.Category = *p.Category
		upd = upd.Set(expression.Name("category"), expression.Value(next.Category))
	}
	if p.PriceCents != nil {
		next.PriceCents = *p.PriceCents
		upd = upd.Set(expression.Name("priceCents"), expression.Value(next.PriceCents))
	}
	n := len(bs)
	next.StockBuckets = n
	if p.StockBuckets != nil {
		next.StockBuckets = *p.StockBuckets
	}
	upd = upd.Set(expression.Name("stockBuckets"), expression.Value(next.StockBuckets)).
		Set(expression.Name("shape"), expression.Value(products.Shape))
	next.Shape = products.Shape
	cond := expression.Name("version").Equal(expression.Value(cur.Version))
	held := catalogStock(cur)
	if cur.CatalogStock != nil {
		// A shape-1 item: its stock moves into the buckets in this
		// transaction, on the condition that no sale took any since the read.
		upd = upd.Remove(expression.Name("stock"))
		cond = cond.And(expression.Name("stock").Equal(expression.Value(held)))
		next.CatalogStock = nil
	}
	e := mustBuild(expression.NewBuilder().WithUpdate(upd).WithCondition(cond))
	actions := []types.TransactWriteItem{{Update: &types.Update{
		TableName: aws.String(s.t.Products), Key: productKey(cur.ProductID),
		UpdateExpression: e.Update(), ConditionExpression: e.Condition(),
		ExpressionAttributeNames: e.Names(), ExpressionAttributeValues: e.Values(),
	}}}
	units := unitsOf(bs)
	total := stock.Sum(units) + held
	target := total
	switch {
	case p.Stock != nil:
		target = *p.Stock
	case p.StockDelta != nil:
		target = total + *p.StockDelta
		if target < 0 || target > products.MaxStock {
			return products.Product{}, nil, &errcode.Error{
				Code: errcode.Conflict, Products: []string{cur.ProductID},
				Message: fmt.Sprintf("product %s has %d in stock: a change of %d would take it out of 0..%d", cur.ProductID, total, *p.StockDelta, products.MaxStock),
			}
		}
	}
	next.Stock = target
	next.Version += versions(bs)

	if p.Stock != nil || p.StockBuckets != nil || missing(bs) || cur.CatalogStock != nil {
		// Respread: the buckets' versions carry over (those of dropped
		// buckets to bucket 0), so the product's version moves by 1.
		vs := make([]int64, next.StockBuckets)
		for i, b := range bs {
			j := i
			if j >= next.StockBuckets {
				j = 0
			}
			vs[j] += b.Version
		}
		for i, share := range stock.Spread(target, next.StockBuckets) {
			var was *bucket
			if i < n {
				was = &bs[i]
			}
			put, err := s.putBucket(next, cur.Version+1, i, share, vs[i], was)
			if err != nil {
				return products.Product{}, nil, fmt.Errorf("patch product %s: %w", cur.ProductID, err)
			}
			actions = append(actions, put)
		}
		for i := next.StockBuckets; i < n; i++ {
			actions = append(actions, s.deleteBucket(cur.ProductID, i, &bs[i]))
		}
		return next, actions, nil
	}
	changes := make([]int64, n)
	// A restock stamps every bucket (bucket.At): a page that reads some of
	// them before it and some after reads them again as of one instant.
	var at *int64
	if d := p.StockDelta; d != nil && *d > 0 {
		copy(changes, stock.Spread(*d, n))
		if n > 1 {
			at = aws.Int64(cur.Version + 1)
		}
	} else if d != nil && *d < 0 {
		for _, t := range stock.Plan(units, -*d, s.randomBucket(n)) {
			changes[t.Bucket] = -t.Units
		}
	}
	copies := next.Name != cur.Name || next.PriceCents != cur.PriceCents
	for i, c := range changes {
		var was *bucket
		if pinned {
			was = &bs[i]
		}
		switch {
		case c != 0 || copies || at != nil:
			var need int64
			if c < 0 {
				need = -c
			}
			actions = append(actions, s.bucketUpdate(next, i, c, need, at, was))
		case pinned:
			actions = append(actions, s.checkBucket(cur.ProductID, i, bs[i]))
		}
	}
	return next, actions, nil
}

// missing reports a bucket that does not exist (a product written before
// its stock had buckets): a patch writes all of them whole.
func missing(bs []bucket) bool {
	for _, b := range bs {
		if b.BucketID == "" {
			return true
		}
	}
	return false
}

// bucketUpdate changes bucket i of p by delta units, on the condition that
// it exists and holds need units (and is at the version it was read at,
// when was is given), copies p's price and name to it, and stamps it with
// at when at is not nil (bucket.At).
func (s *Store) bucketUpdate(p products.Product, i int, delta, need int64, at *int64, was *bucket) types.TransactWriteItem {
	upd := expression.Set(expression.Name("priceCents"), expression.Value(p.PriceCents)).
		Set(expression.Name("name"), expression.Value(p.Name))
	if delta != 0 {
		upd = upd.Add(expression.Name("units"), expression.Value(delta))
	}
	if at != nil {
		upd = upd.Set(expression.Name("at"), expression.Value(*at))
	}
	cond := expression.AttributeExists(expression.Name("bucketId"))
	if need > 0 {
		cond = cond.And(expression.Name("units").GreaterThanEqual(expression.Value(need)))
	}
	if was != nil {
		cond = cond.And(expression.Name("version").Equal(expression.Value(was.Version)))
	}
	e := mustBuild(expression.NewBuilder().WithUpdate(upd).WithCondition(cond))
	return types.TransactWriteItem{Update: &types.Update{
		TableName: aws.String(s.t.ProductStock), Key: bucketKey(p.ProductID, i),
		UpdateExpression: e.Update(), ConditionExpression: e.Condition(),
		ExpressionAttributeNames: e.Names(), ExpressionAttributeValues: e.Values(),
	}}
}

// DeleteProduct removes product id and its stock buckets in one
// transaction, conditional on the version read (ifMatch covers the
// buckets' too). Codes: NotFound, PreconditionFailed.
func (s *Store) DeleteProduct(ctx context.Context, id string, ifMatch *int64) error {
	defer s.catalogs.forget(id)
	for attempt := 1; attempt <= s.cfg.MaxAttempts; attempt++ {
		cur, err := s.getProduct(ctx, id, true)
		if err != nil {
			return err
		}
		var bs []bucket
		if ifMatch != nil {
			read, err := s.readBuckets(ctx, map[string]int{id: bucketsOf(cur)}, true)
			if err != nil {
				return fmt.Errorf("delete product %s: %w", id, err)
			}
			bs = read[id]
			if cur.Version+versions(bs) != *ifMatch {
				return errcode.Errorf(errcode.PreconditionFailed, "product %s is not at version %d", id, *ifMatch)
			}
		}
		e := mustBuild(expression.NewBuilder().WithCondition(expression.Name("version").Equal(expression.Value(cur.Version))))
		actions := []types.TransactWriteItem{{Delete: &types.Delete{
			TableName: aws.String(s.t.Products), Key: productKey(id),
			ConditionExpression: e.Condition(), ExpressionAttributeNames: e.Names(), ExpressionAttributeValues: e.Values(),
		}}}
		for i := 0; i < bucketsOf(cur); i++ {
			var was *bucket
			if bs != nil {
				was = &bs[i]
			}
			actions = append(actions, s.deleteBucket(id, i, was))
		}
		_, err = s.db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: actions})
		if err == nil {
			return nil
		}
		c, ok := cancelled(err)
		switch {
		case !ok:
			return fmt.Errorf("delete product %s: %w", id, classify(err))
		case c.anyCondition():
			continue
		case !c.retryable():
			return fmt.Errorf("delete product %s: cancelled %v: %w", id, c.codes, err)
		}
		if err := s.backoff(ctx, attempt); err != nil {
			return err
		}
	}
	return contention("delete product")
}

// ListProductsByCategory returns the products of a category, oldest first.
// Codes: Invalid (a position of another list).
func (s *Store) ListProductsByCategory(ctx context.Context, category string, limit int, after *Position) (Page[products.Product], error) {
	var start map[string]string
	if after != nil {
		if err := checkKey(after.Key, "category", "productId"); err != nil || len(after.Shards) > 0 {
			return Page[products.Product]{}, badCursor()
		}
		start = after.Key
	}
	kc := expression.Key("category").Equal(expression.Value(category))
	e := mustBuild(expression.NewBuilder().WithKeyCondition(kc))
	out, err := s.db.Query(ctx, &dynamodb.QueryInput{
		TableName: aws.String(s.t.Products), IndexName: aws.String(tables.ProductsByCategory),
		KeyConditionExpression: e.KeyCondition(), ExpressionAttributeNames: e.Names(), ExpressionAttributeValues: e.Values(),
		Limit: aws.Int32(ClampLimit(limit) + 1), ExclusiveStartKey: keyToAV(start),
	})
	if err != nil {
		return Page[products.Product]{}, fmt.Errorf("list category %s: %w", category, classify(err))
	}
	items := make([]products.Product, 0, len(out.Items))
	for _, it := range out.Items {
		p, err := s.decodeProduct(ctx, it)
		if err != nil {
			return Page[products.Product]{}, fmt.Errorf("list category %s: %w", category, err)
		}
		items = append(items, p)
	}
	if err := s.withStock(ctx, items, false); err != nil {
		return Page[products.Product]{}, fmt.Errorf("list category %s: %w", category, err)
	}
	page, err := pageOf(items, int(ClampLimit(limit)), out.LastEvaluatedKey, func(p products.Product) map[string]string {
		return map[string]string{"category": p.Category, "productId": p.ProductID}
	})
	if err != nil {
		return Page[products.Product]{}, fmt.Errorf("list category %s: %w", category, err)
	}
	return page, nil
}

// getProducts reads the catalog items of products by id (strongly
// consistent when asked; Stock left 0); missing ids are absent from the map.
func (s *Store) getProducts(ctx context.Context, ids []string, consistent bool) (map[string]products.Product, error) {
	ps, _, err := s.getProductsAndUser(ctx, ids, "", consistent)
	return ps, err
}

// getProductsAndUser is getProducts that also reads whether user userID is
// registered, in the same BatchGetItem (no user read when userID is empty).
func (s *Store) getProductsAndUser(ctx context.Context, ids []string, userID string, consistent bool) (map[string]products.Product, bool, error) {
	out := make(map[string]products.Product, len(ids))
	found := false
	size := 100 // keys a BatchGetItem takes
	if userID != "" {
		size-- // the user's key rides with the first chunk
	}
	for start := 0; start < len(ids) || (start == 0 && userID != ""); start += size {
		chunk := ids[start:min(start+size, len(ids))]
		keys := make([]map[string]types.AttributeValue, 0, len(chunk))
		for _, id := range chunk {
			keys = append(keys, productKey(id))
		}
		var user []map[string]types.AttributeValue
		if start == 0 && userID != "" {
			user = append(user, userKey(userID))
		}
		req := map[string]types.KeysAndAttributes{
			s.t.Products: {Keys: keys, ConsistentRead: aws.Bool(consistent)},
			s.t.Users:    {Keys: user, ConsistentRead: aws.Bool(consistent), ProjectionExpression: aws.String("userId")},
		}
		for table, ka := range req {
			if len(ka.Keys) == 0 { // BatchGetItem refuses a table with no keys
				delete(req, table)
			}
		}
		err := s.batchGet(ctx, "get products", req, func(table string, it map[string]types.AttributeValue) error {
			if table == s.t.Users {
				found = true
				return nil
			}
			p, err := s.decodeProduct(ctx, it)
			if err != nil {
				return fmt.Errorf("get products: %w", err)
			}
			out[p.ProductID] = p
			return nil
		})
		if err != nil {
			return nil, false, err
		}
	}
	return out, found, nil
}
