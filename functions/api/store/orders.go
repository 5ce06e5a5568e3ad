package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/shopstream/shopstream/shared/carts"
	"github.com/shopstream/shopstream/shared/clock"
	"github.com/shopstream/shopstream/shared/errcode"
	"github.com/shopstream/shopstream/shared/orders"
	"github.com/shopstream/shopstream/shared/products"
	"github.com/shopstream/shopstream/shared/shapes"
	"github.com/shopstream/shopstream/shared/stock"
	"github.com/shopstream/shopstream/shared/tables"
)

func orderKey(userID, orderID string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{
		"userId":  &types.AttributeValueMemberS{Value: userID},
		"orderId": &types.AttributeValueMemberS{Value: orderID},
	}
}

// shortage is a Conflict naming the products an order cannot have.
func shortage(gone, short []string) error {
	var parts []string
	if len(short) > 0 {
		parts = append(parts, "short of stock: "+strings.Join(short, ", "))
	}
	if len(gone) > 0 {
		parts = append(parts, "no longer available: "+strings.Join(gone, ", "))
	}
	return &errcode.Error{Code: errcode.Conflict, Message: strings.Join(parts, "; "), Products: append(append([]string{}, short...), gone...)}
}

// PlaceOrder places an order of userID for the request's items, or the cart's
// lines (emptying the cart). The user's registration is read with the
// catalog items, in the same BatchGetItem (no route or function deletes a
// user, so a user read once stays registered and no transaction needs to
// check it, nor to meet the counters' writes to the user item). One transaction puts the
// order with each line's current name and price, takes each line's quantity
// from the product's stock buckets (one bucket drawn at random, or several when
// no single bucket holds it), each decrement conditional on the bucket
// holding what it takes and carrying the price and name read, and claims
// the idempotency key when given, keeping what claim.Keep makes of the
// order. The catalog item is read, never written. A product is short of
// stock only when a read of its catalog item and all its buckets as of one
// instant (TransactGetItems) finds less than the quantity. Cancellations by
// contention or throttling are retried with jittered backoff, committing
// the same read again with buckets drawn again; when the retries run out,
// a consistent read, and for a product it finds short one as of one
// instant, decides between Conflict (short) and Unavailable. Codes: Invalid, NotFound (user
// not registered), Conflict (short of stock, product gone, empty cart, too
// large for one transaction), Unavailable; ErrKeyUsed when the claim's key
// was used first by another request.
func (s *Store) PlaceOrder(ctx context.Context, userID string, req orders.Request, claim *Claim[orders.Order]) (orders.Order, error) {
	var lessons orderLessons
	var last orderRead // for the answer when the retries run out
	reread := true
	quick := false // the last round went at once, without a wait
	for attempt := 1; attempt <= s.cfg.MaxAttempts; attempt++ {
		rd := last
		if reread {
			var err error
			if rd, err = s.readOrder(ctx, userID, req, &lessons); err != nil {
				return orders.Order{}, fmt.Errorf("place order: %w", err)
			}
			if rd.readAgain {
				// A replica behind (a product or user just created): read
				// again, strongly consistent. Not a round lost to
				// contention, so not one of its attempts; it happens once,
				// the read after it being consistent.
				attempt--
				continue
			}
			last = rd
		}
		reread = true
		plan := planOrder(rd, lessons, s.randomBucket)
		if len(plan.short) > 0 && !plan.readAgain {
			// Short by a read that may straddle a respread: read the
			// short products again as of one instant, and plan on that.
			if err := s.readShortAtOnce(ctx, &rd, plan.short); err != nil {
				return orders.Order{}, fmt.Errorf("place order: %w", err)
			}
			last = rd
			plan = planOrder(rd, lessons, s.randomBucket)
		}
		switch {
		case plan.readAgain:
			lessons.consistent = true
			continue
		case len(plan.gone)+len(plan.short) > 0:
			return orders.Order{}, shortage(plan.gone, plan.short)
		}
		o, outcome, err := s.commitOrder(ctx, userID, rd, plan, claim, &lessons)
		switch outcome {
		case placed:
			return o, nil
		case failed:
			return orders.Order{}, err
		case replan:
			// Read again: what the contended rounds learned of the
			// buckets others held is stale.
			lessons.held, lessons.elsewhere, quick = nil, false, false
			continue
		}
		// Contended: what was read still holds (a change since then fails
		// a decrement's condition, and the round after reads again), so
		// the next round only draws its buckets again and commits. A
		// round's read is a call like its commit: re-reading on every
		// conflict doubled the calls of the contended orders.
		reread = false
		if lessons.elsewhere && !quick {
			// Another transaction held the one bucket it drew, and the
			// product has others: draw another and go again at once, as
			// a buyer in a flash sale would, once in a row (a second
			// round held too waits as below).
			quick = true
			continue
		}
		quick = false
		wait := s.backoff
		if !lessons.throttled {
			wait = s.conflictBackoff
		}
		if err := wait(ctx, attempt); err != nil {
			return orders.Order{}, s.refusal(ctx, last.items, err)
		}
	}
	return orders.Order{}, s.refusal(ctx, last.items, contention("place order"))
}

// orderLessons is what the rounds of an order's placement learned for the
// next: the products to plan over all their buckets, from a consistent read
// of them (wide: a drawn bucket fell short, or a catalog item's stock did),
// whether the catalog items must be read consistently (a read found
// stale), and whether the user is known to be registered (no route or
// function deletes a user, so once read it stays so).
type orderLessons struct {
	wide       map[string]bool
	consistent bool
	userKnown  bool
	// throttled: the last round was refused by throttling, not only by
	// other transactions holding its items.
	throttled bool
	// held: the bucket each product's decrement found held by another
	// transaction in the last round, which the next round's draw leaves
	// out; elsewhere: every action the last round found held was such a
	// decrement, of a product with another bucket to draw.
	held      map[string]int
	elsewhere bool
}

func (l *orderLessons) widen(id string) {
	if l.wide == nil {
		l.wide = map[string]bool{}
	}
	l.wide[id] = true
}

// orderRead is what one round reads: the cart (for an order from it), the
// order's lines merged by product, their catalog items, and the buckets of
// the products planned wide, read consistently. readAgain: a product was
// missing from an eventually consistent read, which may lag its creation.
type orderRead struct {
	fromCart  bool
	cart      carts.Cart
	items     []orders.Item
	products  map[string]products.Product
	buckets   map[string][]bucket
	readAgain bool
}

// readOrder is the read of a round. It widens the lessons to the products
// whose catalog item (shape 1) does not hold the quantity, and to every
// product when one is gone, so the refusal names the short ones too.
func (s *Store) readOrder(ctx context.Context, userID string, req orders.Request, l *orderLessons) (orderRead, error) {
	rd := orderRead{fromCart: req.FromCart}
	items := req.Items
	if req.FromCart {
		var err error
		if rd.cart, err = s.getCart(ctx, userID, true); err != nil {
			return orderRead{}, err
		}
		if len(rd.cart.Lines) == 0 {
			return orderRead{}, errcode.Errorf(errcode.Conflict, "the cart is empty")
		}
		items = nil
		for _, id := range rd.cart.ProductIDs() {
			items = append(items, orders.Item{ProductID: id, Quantity: rd.cart.Lines[id].Quantity})
		}
	}
	if userID == "" {
		return orderRead{}, errcode.Errorf(errcode.Invalid, "an order needs a user")
	}
	merged, err := orders.Merge(items)
	if err != nil {
		return orderRead{}, err
	}
	rd.items = merged
	ids := make([]string, len(merged))
	for i, it := range merged {
		ids[i] = it.ProductID
	}
	who := userID
	if l.userKnown {
		who = ""
	}
	var registered bool
	if rd.products, registered, err = s.getProductsAndUser(ctx, ids, who, l.consistent); err != nil {
		return orderRead{}, err
	}
	switch {
	case who == "" || registered:
		l.userKnown = true
	case !l.consistent:
		// An eventually consistent read may lag a registration.
		l.consistent = true
		return orderRead{readAgain: true}, nil
	default:
		return orderRead{}, errcode.Errorf(errcode.NotFound, "user %s is not registered", userID)
	}
	gone := false
	for _, it := range merged {
		p, ok := rd.products[it.ProductID]
		switch {
		case !ok:
			gone = true
		case p.CatalogStock != nil && *p.CatalogStock < int64(it.Quantity):
			l.widen(it.ProductID)
		}
	}
	if gone && !l.consistent {
		l.consistent = true
		return orderRead{readAgain: true}, nil
	}
	counts := map[string]int{}
	for id, p := range rd.products {
		if gone || l.wide[id] {
			l.widen(id)
			counts[id] = bucketsOf(p)
		}
	}
	if rd.buckets, err = s.readBuckets(ctx, counts, true); err != nil {
		return orderRead{}, err
	}
	return rd, nil
}

// readShortAtOnce replaces in rd the catalog items and buckets of the
// products found short with a read of each as of one instant
// (productAtOnce): the consistent BatchGetItem of the buckets reads each
// item read-committed on its own, so beside a respread ([8,0] to [5,4]) it
// can read 5 and 0, and find short a product that never held less than 8.
// A product gone by then leaves rd.products.
func (s *Store) readShortAtOnce(ctx context.Context, rd *orderRead, short []string) error {
	for _, id := range short {
		p, bs, ok, err := s.productAtOnce(ctx, id, bucketsOf(rd.products[id]))
		if err != nil {
			return err
		}
		if !ok {
			delete(rd.products, id)
			continue
		}
		rd.products[id], rd.buckets[id] = p, bs
	}
	return nil
}

// orderPlan is a round's plan: where each product's units are taken from,
// or the products gone and short. readAgain: a product is short only by a
// catalog item's stock that an eventually consistent read may have shown
// stale.
type orderPlan struct {
	takes       map[string][]stock.Take
	gone, short []string
	readAgain   bool
}

// planOrder plans the takes of a round from its read, with no I/O: a
// product not planned wide takes its quantity from one bucket drawn at
// random (or from its catalog item, shape 1); a wide one from its buckets
// as read (the catalog item's stock last), starting at a drawn bucket
// (stock.Plan), and is short when they hold less.
func planOrder(rd orderRead, l orderLessons, draw func(n int) int) orderPlan {
	plan := orderPlan{takes: make(map[string][]stock.Take, len(rd.items))}
	for _, it := range rd.items {
		p, ok := rd.products[it.ProductID]
		if !ok {
			plan.gone = append(plan.gone, it.ProductID)
			continue
		}
		n, q := bucketsOf(p), int64(it.Quantity)
		switch {
		case !l.wide[it.ProductID] && p.CatalogStock != nil:
			plan.takes[it.ProductID] = []stock.Take{{Bucket: onCatalog, Units: q}}
			continue
		case !l.wide[it.ProductID]:
			b, found := l.held[it.ProductID]
			if !found || n == 1 || b >= n {
				plan.takes[it.ProductID] = []stock.Take{{Bucket: draw(n), Units: q}}
				continue
			}
			// Another transaction holds bucket b: draw among the others.
			i := draw(n - 1)
			if i >= b {
				i++
			}
			plan.takes[it.ProductID] = []stock.Take{{Bucket: i, Units: q}}
			continue
		}
		sources := unitsOf(rd.buckets[it.ProductID])
		if p.CatalogStock != nil {
			sources = append(sources, *p.CatalogStock)
		}
		t := stock.Plan(sources, q, draw(len(sources)))
		for i := range t {
			if t[i].Bucket == n {
				t[i].Bucket = onCatalog
			}
		}
		switch {
		case t == nil && p.CatalogStock != nil && !l.consistent:
			plan.readAgain = true
		case t == nil:
			plan.short = append(plan.short, it.ProductID)
		}
		plan.takes[it.ProductID] = t
	}
	if len(plan.gone) > 0 {
		plan.readAgain = false // named with the short ones now
	}
	return plan
}

// commitOutcome is how a round's commit ended.
type commitOutcome int

const (
	placed    commitOutcome = iota // the order is placed
	failed                         // an answer: the error
	replan                         // a condition failed: plan again from what it taught
	contended                      // contention or throttling: back off, then again
)

// commitOrder writes a round's plan in one transaction (placeActions) and
// judges a cancellation: the claim's condition is an answer;
// a stock decrement's failed condition teaches the lessons what to read
// consistently and plan wide next (replan); contention or throttling is
// busy.
func (s *Store) commitOrder(ctx context.Context, userID string, rd orderRead, plan orderPlan, claim *Claim[orders.Order], l *orderLessons) (orders.Order, commitOutcome, error) {
	now := s.stamp()
	o := orders.Order{UserID: userID, OrderID: s.cfg.NewID(), Status: orders.Placed, CreatedAt: now, UpdatedAt: now, Version: 1, Shape: shapes.Order}
	for _, it := range rd.items {
		p := rd.products[it.ProductID]
		o.Lines = append(o.Lines, orders.Line{ProductID: p.ProductID, ProductName: p.Name, UnitPriceCents: p.PriceCents, Quantity: it.Quantity})
	}
	o.TotalCents = orders.Total(o.Lines)
	o.OpenShard = orders.OpenKey(orders.Placed, orders.Shard(o.OrderID, tables.OpenOrderShards))

	tx, err := s.placeActions(o, rd.products, plan.takes, rd.cart, rd.fromCart)
	if err != nil {
		return o, failed, fmt.Errorf("place order %s: %w", o.OrderID, err)
	}
	if n := len(tx.actions) + btoi(claim != nil); n > maxTransactItems {
		return o, failed, tooLarge(n, plan.takes)
	}
	if claim != nil {
		kept, err := claim.Keep(o)
		if err != nil {
			return o, failed, fmt.Errorf("place order %s: %w", o.OrderID, err)
		}
		put, err := s.claimPut(claim.Key, claim.RequestHash, kept)
		if err != nil {
			return o, failed, fmt.Errorf("place order %s: %w", o.OrderID, err)
		}
		tx.claim = tx.add(put)
	}

	_, err = s.db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: tx.actions})
	for _, l := range o.Lines {
		s.catalogs.sold(l.ProductID) // whatever the answer: it may have committed
	}
	if err == nil {
		return o, placed, nil
	}
	c, ok := cancelled(err)
	if !ok {
		return o, failed, fmt.Errorf("place order %s: %w", o.OrderID, classify(err))
	}
	switch {
	case c.failed(tx.claim):
		return o, failed, ErrKeyUsed
	case c.anyCondition():
		for _, d := range tx.decrements {
			if c.failed(d.at) {
				l.learn(d, c.items[d.at], rd.products[d.productID])
			}
		}
		return o, replan, nil
	case c.retryable():
		l.throttled = c.throttled()
		l.heldBy(c, tx.decrements, rd.products, plan.takes)
		return o, contended, nil
	}
	return o, failed, fmt.Errorf("place order %s: cancelled %v: %w", o.OrderID, c.codes, err)
}

// heldBy takes in which of a round's decrements met another transaction
// holding their bucket (c: the round's cancellation by contention), for the
// next round to draw other buckets, and whether that round may go at once
// (elsewhere): only when every action refused was such a decrement of a
// product planned on one bucket of several, so that the next round meets
// none of the transactions this one met.
func (l *orderLessons) heldBy(c *cancellation, decrements []decrementRef, ps map[string]products.Product, takes map[string][]stock.Take) {
	l.held = nil
	l.elsewhere = !l.throttled
	at := make(map[int]decrementRef, len(decrements))
	for _, d := range decrements {
		at[d.at] = d
	}
	for i, code := range c.codes {
		if code != reasonConflict {
			continue
		}
		d, ok := at[i]
		if !ok || d.Bucket == onCatalog || l.wide[d.productID] || len(takes[d.productID]) != 1 || bucketsOf(ps[d.productID]) < 2 {
			l.elsewhere = false
			continue
		}
		if l.held == nil {
			l.held = map[string]int{}
		}
		l.held[d.productID] = d.Bucket
	}
	if l.held == nil {
		l.elsewhere = false
	}
}

// learn takes in what a stock decrement's failed condition shows (item: the
// decremented item as it stood, nil if gone; p: the catalog item as read):
// the bucket did not hold what was taken, or the catalog read is stale (a
// new price or name, a bucket gone with a respread or a deletion, stock
// moved from the catalog item into buckets).
func (l *orderLessons) learn(d decrementRef, item map[string]types.AttributeValue, p products.Product) {
	if d.Bucket == onCatalog {
		var now products.Product
		if item != nil && attributevalue.UnmarshalMap(item, &now) == nil && (now.CatalogStock == nil || *now.CatalogStock < d.Units) {
			l.widen(d.productID)
		}
		l.consistent = true
		return
	}
	var b bucket
	if item == nil || attributevalue.UnmarshalMap(item, &b) != nil {
		// A bucket gone: a stale catalog read or, read consistently,
		// buckets never written (a product older than its buckets):
		// count them all.
		if l.consistent {
			l.widen(d.productID)
		}
		l.consistent = true
		return
	}
	if b.PriceCents != p.PriceCents || b.Name != p.Name {
		l.consistent = true
	}
	if b.Units < d.Units {
		// Planned over all the buckets, from a consistent read of the
		// catalog item too: a stale one may count fewer buckets.
		l.widen(d.productID)
		l.consistent = true
	}
}

// refusal answers an order whose retries ran out with busy, unless a
// consistent read of its products' catalog items and all their buckets
// finds some short of the quantity, or gone: then it is a Conflict naming
// them. A sold-out product's bucket stays throttled by its buyers' refused
// writes (a condition that fails still consumes write units), so its last
// buyers run out of retries where a read, which costs no write units,
// answers 409. The catalog items are read again: the round's read may be
// seconds old (contended rounds commit it again), and a respread since
// then counts other buckets. A product that read finds short is read again
// as of one instant (productAtOnce) before it is named.
func (s *Store) refusal(ctx context.Context, items []orders.Item, busy error) error {
	if len(items) == 0 || ctx.Err() != nil {
		return busy
	}
	ids := make([]string, len(items))
	for i, it := range items {
		ids[i] = it.ProductID
	}
	ps, err := s.getProducts(ctx, ids, true)
	if err != nil {
		return busy
	}
	counts := make(map[string]int, len(items))
	for _, it := range items {
		if p, ok := ps[it.ProductID]; ok {
			counts[it.ProductID] = bucketsOf(p)
		}
	}
	units, err := s.readBuckets(ctx, counts, true)
	if err != nil {
		return busy
	}
	var gone, short []string
	for _, it := range items {
		p, ok := ps[it.ProductID]
		if ok && stock.Sum(unitsOf(units[it.ProductID]))+catalogStock(p) < int64(it.Quantity) {
			// Short by reads that may straddle a respread: as of one
			// instant, is it?
			var bs []bucket
			if p, bs, ok, err = s.productAtOnce(ctx, it.ProductID, bucketsOf(p)); err != nil {
				return busy
			}
			units[it.ProductID] = bs
		}
		switch {
		case !ok:
			gone = append(gone, it.ProductID)
		case stock.Sum(unitsOf(units[it.ProductID]))+catalogStock(p) < int64(it.Quantity):
			short = append(short, it.ProductID)
		}
	}
	if len(gone)+len(short) == 0 {
		return busy
	}
	return shortage(gone, short)
}

// maxTransactItems is the most actions one TransactWriteItems holds.
const maxTransactItems = 100

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// tooLarge is the Conflict of an order whose stock decrements (a line
// spread over several buckets takes one per bucket) do not fit in one
// transaction with the order's other writes; it names the products taken
// from more than one bucket.
func tooLarge(n int, takes map[string][]stock.Take) error {
	var spread []string
	for id, t := range takes {
		if len(t) > 1 {
			spread = append(spread, id)
		}
	}
	sort.Strings(spread)
	return &errcode.Error{
		Code: errcode.Conflict, Products: spread,
		Message: fmt.Sprintf("the order needs %d writes and one transaction holds at most %d: its quantities of %s are spread over many stock buckets; order fewer units of them, or fewer lines, at once",
			n, maxTransactItems, strings.Join(spread, ", ")),
	}
}

// placement is the transaction of an order's placement, each action known
// by name: where the order, the cart's emptying and the idempotency claim
// stand among the actions (-1 when absent), and each stock decrement with
// its own.
type placement struct {
	actions            []types.TransactWriteItem
	order, cart, claim int
	decrements         []decrementRef
}

// add appends an action and returns where it stands.
func (p *placement) add(a types.TransactWriteItem) int {
	p.actions = append(p.actions, a)
	return len(p.actions) - 1
}

// decrementRef names the product and units of a stock decrement, and where
// it stands among the placement's actions.
type decrementRef struct {
	productID string
	stock.Take
	at int
}

// placeActions returns the transaction of a placement: the order, the stock
// decrements of each line and, from a cart, the cart's emptying (the caller
// adds the idempotency claim).
func (s *Store) placeActions(o orders.Order, ps map[string]products.Product, takes map[string][]stock.Take, cart carts.Cart, fromCart bool) (*placement, error) {
	item, err := attributevalue.MarshalMap(o)
	if err != nil {
		return nil, err
	}
	tx := &placement{cart: -1, claim: -1}
	orderCond := notExists("orderId")
	tx.order = tx.add(types.TransactWriteItem{Put: &types.Put{
		TableName: aws.String(s.t.Orders), Item: item,
		ConditionExpression: orderCond.Condition(), ExpressionAttributeNames: orderCond.Names(),
	}})
	for _, l := range o.Lines {
		for _, t := range takes[l.ProductID] {
			at := tx.add(s.decrement(ps[l.ProductID], t))
			tx.decrements = append(tx.decrements, decrementRef{productID: l.ProductID, Take: t, at: at})
		}
	}
	if fromCart {
		upd := expression.Set(expression.Name("lines"), expression.Value(map[string]carts.Line{})).
			Set(expression.Name("updatedAt"), expression.Value(o.CreatedAt)).
			Add(expression.Name("version"), expression.Value(1))
		cond := expression.Name("version").Equal(expression.Value(cart.Version))
		e := mustBuild(expression.NewBuilder().WithUpdate(upd).WithCondition(cond))
		tx.cart = tx.add(types.TransactWriteItem{Update: &types.Update{
			TableName: aws.String(s.t.Carts), Key: userKey(o.UserID),
			UpdateExpression: e.Update(), ConditionExpression: e.Condition(),
			ExpressionAttributeNames: e.Names(), ExpressionAttributeValues: e.Values(),
		}})
	}
	return tx, nil
}

// GetOrder returns an order of userID, read strongly consistent: an order
// just placed or cancelled shows as it is. Codes: NotFound.
func (s *Store) GetOrder(ctx context.Context, userID, orderID string) (orders.Order, error) {
	return s.getOrder(ctx, userID, orderID, true)
}

func (s *Store) getOrder(ctx context.Context, userID, orderID string, consistent bool) (orders.Order, error) {
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: aws.String(s.t.Orders), Key: orderKey(userID, orderID), ConsistentRead: aws.Bool(consistent),
	})
	if err != nil {
		return orders.Order{}, fmt.Errorf("get order %s: %w", orderID, classify(err))
	}
	if out.Item == nil {
		return orders.Order{}, errcode.Errorf(errcode.NotFound, "order %s not found", orderID)
	}
	var o orders.Order
	if err := attributevalue.UnmarshalMap(out.Item, &o); err != nil {
		return orders.Order{}, fmt.Errorf("get order %s: %w", orderID, err)
	}
	return o, nil
}

// statusUpdate is the update of an order moving to status to at now: the
// open-orders key follows the status while open and is removed when the order
// closes (else the sparse index keeps a stale entry); a closed order gets its
// expiry.
func (s *Store) statusUpdate(o orders.Order, to orders.Status, ifMatch *int64, now time.Time) expression.Expression {
	upd := expression.Set(expression.Name("status"), expression.Value(to)).
		Set(expression.Name("updatedAt"), expression.Value(clock.Format(now))).
		Add(expression.Name("version"), expression.Value(1))
	if to.Open() {
		upd = upd.Set(expression.Name("openShard"), expression.Value(orders.OpenKey(to, orders.Shard(o.OrderID, tables.OpenOrderShards))))
	} else {
		upd = upd.Remove(expression.Name("openShard")).
			Set(expression.Name("expiresAt"), expression.Value(now.Add(s.cfg.OrderRetention).Unix()))
	}
	cond := expression.Name("status").Equal(expression.Value(o.Status))
	if ifMatch != nil {
		cond = cond.And(expression.Name("version").Equal(expression.Value(*ifMatch)))
	}
	return mustBuild(expression.NewBuilder().WithUpdate(upd).WithCondition(cond))
}

// withStatus is o as statusUpdate(o, to, _, now) leaves it.
func (s *Store) withStatus(o orders.Order, to orders.Status, now time.Time) orders.Order {
	o.Status, o.UpdatedAt, o.Version = to, clock.Format(now), o.Version+1
	if to.Open() {
		o.OpenShard = orders.OpenKey(to, orders.Shard(o.OrderID, tables.OpenOrderShards))
	} else {
		o.OpenShard = ""
		o.ExpiresAt = clock.Epoch(now.Add(s.cfg.OrderRetention).Unix())
	}
	return o
}

// CancelOrder cancels an order of userID that is still PLACED and puts its
// quantities back in stock, in one transaction. Lines of products deleted
// since are not restocked. Codes: NotFound, Conflict (not PLACED).
func (s *Store) CancelOrder(ctx context.Context, userID, orderID string) (orders.Order, error) {
	gone := map[string]bool{}
	for attempt := 1; attempt <= s.cfg.MaxAttempts; attempt++ {
		o, err := s.getOrder(ctx, userID, orderID, true)
		if err != nil {
			return orders.Order{}, fmt.Errorf("cancel order: %w", err)
		}
		if o.Status != orders.Placed {
			return orders.Order{}, errcode.Errorf(errcode.Conflict, "order %s is %s; only a PLACED order can be cancelled", orderID, o.Status)
		}
		now := s.now()
		e := s.statusUpdate(o, orders.Cancelled, &o.Version, now)
		actions := []types.TransactWriteItem{{Update: &types.Update{
			TableName: aws.String(s.t.Orders), Key: orderKey(userID, orderID),
			UpdateExpression: e.Update(), ConditionExpression: e.Condition(),
			ExpressionAttributeNames: e.Names(), ExpressionAttributeValues: e.Values(),
		}}}
		var ids []string
		for _, l := range o.Lines {
			if !gone[l.ProductID] {
				ids = append(ids, l.ProductID)
			}
		}
		ps, err := s.getProducts(ctx, ids, true)
		if err != nil {
			return orders.Order{}, fmt.Errorf("cancel order %s: %w", orderID, err)
		}
		for _, l := range o.Lines {
			p, ok := ps[l.ProductID]
			if !ok {
				gone[l.ProductID] = true
			}
			if gone[l.ProductID] {
				continue
			}
			// One bucket takes the units back, and no other is stamped
			// (bucket.At): a cancel that wrote every bucket would meet,
			// during a sale, every transaction holding any of them
			// (docs/decisions.md, "The page of a product of several
			// buckets", revisited in 0.22.0).
			at := onCatalog
			if p.CatalogStock == nil {
				at = s.randomBucket(bucketsOf(p))
			}
			actions = append(actions, s.restock(l.ProductID, at, int64(l.Quantity)))
		}
		_, err = s.db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: actions})
		for _, l := range o.Lines {
			s.catalogs.sold(l.ProductID)
		}
		if err == nil {
			// The order as the transaction left it, without a read that
			// could fail after the commit: a cancel that happened is
			// answered as one (a retry would meet CANCELLED, a 409).
			return s.withStatus(o, orders.Cancelled, now), nil
		}
		c, ok := cancelled(err)
		switch {
		case !ok:
			return orders.Order{}, fmt.Errorf("cancel order %s: %w", orderID, classify(err))
		case c.failed(0):
			continue // changed since read: read again
		case c.anyCondition():
			// A bucket gone: the product was deleted (the next read finds
			// it missing) or its buckets respread (the next read draws
			// among the new ones).
			continue
		case !c.retryable():
			return orders.Order{}, fmt.Errorf("cancel order %s: cancelled %v: %w", orderID, c.codes, err)
		}
		if err := s.backoff(ctx, attempt); err != nil {
			return orders.Order{}, err
		}
	}
	return orders.Order{}, contention("cancel order")
}

// MoveOrder moves an order of userID to status to, forward along PLACED →
// SHIPPED → DELIVERED, conditional on the status it read (and on ifMatch).
// Codes: NotFound, Conflict (any other move), PreconditionFailed.
func (s *Store) MoveOrder(ctx context.Context, userID, orderID string, to orders.Status, ifMatch *int64) (orders.Order, error) {
	for attempt := 1; attempt <= s.cfg.MaxAttempts; attempt++ {
		o, err := s.getOrder(ctx, userID, orderID, true)
		if err != nil {
			return orders.Order{}, fmt.Errorf("move order: %w", err)
		}
		if ifMatch != nil && *ifMatch != o.Version {
			return orders.Order{}, errcode.Errorf(errcode.PreconditionFailed, "order %s is at version %d", orderID, o.Version)
		}
		if !orders.CanMove(o.Status, to) {
			return orders.Order{}, errcode.Errorf(errcode.Conflict, "order %s cannot move from %s to %s", orderID, o.Status, to)
		}
		e := s.statusUpdate(o, to, &o.Version, s.now())
		out, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
			TableName: aws.String(s.t.Orders), Key: orderKey(userID, orderID),
			UpdateExpression: e.Update(), ConditionExpression: e.Condition(),
			ExpressionAttributeNames: e.Names(), ExpressionAttributeValues: e.Values(),
			ReturnValues: types.ReturnValueAllNew,
		})
		if _, ok := isConditionFailed(err); ok {
			continue
		}
		if err != nil {
			return orders.Order{}, fmt.Errorf("move order %s: %w", orderID, classify(err))
		}
		var moved orders.Order
		if err := attributevalue.UnmarshalMap(out.Attributes, &moved); err != nil {
			return orders.Order{}, fmt.Errorf("move order %s: %w", orderID, err)
		}
		return moved, nil
	}
	return orders.Order{}, contention("move order")
}

// ListUserOrders returns userID's orders, newest first, optionally only those
// in status. Codes: Invalid (a position of another list).
func (s *Store) ListUserOrders(ctx context.Context, userID string, status orders.Status, limit int, after *Position) (Page[orders.Order], error) {
	var start map[string]string
	if after != nil {
		if err := checkKey(after.Key, "userId", "orderId"); err != nil || len(after.Shards) > 0 {
			return Page[orders.Order]{}, badCursor()
		}
		start = after.Key
	}
	b := expression.NewBuilder().WithKeyCondition(expression.Key("userId").Equal(expression.Value(userID)))
	if status != "" {
		b = b.WithFilter(expression.Name("status").Equal(expression.Value(status)))
	}
	e := mustBuild(b)
	want := int(ClampLimit(limit))
	var items []orders.Order
	var lek map[string]types.AttributeValue
	// A filter applies after Limit: keep reading until one item more than the
	// page holds is found (so a full last page has no cursor), the partition
	// ends, or a bounded number of reads is spent.
	for reads := 0; ; reads++ {
		out, err := s.db.Query(ctx, &dynamodb.QueryInput{
			TableName: aws.String(s.t.Orders), KeyConditionExpression: e.KeyCondition(), FilterExpression: e.Filter(),
			ExpressionAttributeNames: e.Names(), ExpressionAttributeValues: e.Values(),
			ConsistentRead:   aws.Bool(true), // the user's own orders, as they just left them
			ScanIndexForward: aws.Bool(false), Limit: aws.Int32(int32(want + 1 - len(items))), ExclusiveStartKey: keyToAV(start),
		})
		if err != nil {
			return Page[orders.Order]{}, fmt.Errorf("list orders of %s: %w", userID, classify(err))
		}
		var got []orders.Order
		if err := attributevalue.UnmarshalListOfMaps(out.Items, &got); err != nil {
			return Page[orders.Order]{}, fmt.Errorf("list orders of %s: %w", userID, err)
		}
		items, lek = append(items, got...), out.LastEvaluatedKey
		if len(lek) == 0 || len(items) > want || reads >= 9 {
			break
		}
		if start, err = lekToKey(lek); err != nil {
			return Page[orders.Order]{}, fmt.Errorf("list orders of %s: %w", userID, err)
		}
	}
	if items == nil {
		items = []orders.Order{}
	}
	page, err := pageOf(items, want, lek, func(o orders.Order) map[string]string {
		return map[string]string{"userId": o.UserID, "orderId": o.OrderID}
	})
	if err != nil {
		return Page[orders.Order]{}, fmt.Errorf("list orders of %s: %w", userID, err)
	}
	return page, nil
}

// ListOpenOrders returns the orders in an open status (PLACED, SHIPPED),
// oldest first. The open-orders index is written in tables.OpenOrderShards
// shards; a page reads up to limit entries from each shard after its position
// and merges them by order id (ULIDs order by time), keeping one position per
// shard. Codes: Invalid.
func (s *Store) ListOpenOrders(ctx context.Context, status orders.Status, limit int, after *Position) (Page[orders.Order], error) {
	n := tables.OpenOrderShards
	pos := make([]ShardPosition, n)
	if after != nil {
		if len(after.Shards) != n || after.Key != nil {
			return Page[orders.Order]{}, badCursor()
		}
		for i, sp := range after.Shards {
			if err := checkKey(sp.After, "openShard", "orderId", "userId"); err != nil {
				return Page[orders.Order]{}, err
			}
			if sp.After != nil && sp.After["openShard"] != orders.OpenKey(status, i) {
				return Page[orders.Order]{}, badCursor()
			}
		}
		copy(pos, after.Shards)
	}
	want := int(ClampLimit(limit))

	type shardPage struct {
		items []orders.Order
		more  bool
		err   error
	}
	pages := make([]shardPage, n)
	var wg sync.WaitGroup
	for i := range n {
		if pos[i].Done {
			continue
		}
		wg.Go(func() {
			e := mustBuild(expression.NewBuilder().WithKeyCondition(expression.Key("openShard").Equal(expression.Value(orders.OpenKey(status, i)))))
			out, err := s.db.Query(ctx, &dynamodb.QueryInput{
				TableName: aws.String(s.t.Orders), IndexName: aws.String(tables.OrdersOpenByStatus),
				KeyConditionExpression: e.KeyCondition(), ExpressionAttributeNames: e.Names(), ExpressionAttributeValues: e.Values(),
				ScanIndexForward: aws.Bool(true), Limit: aws.Int32(int32(want + 1)), ExclusiveStartKey: keyToAV(pos[i].After),
			})
			if err != nil {
				pages[i].err = fmt.Errorf("shard %d: %w", i, classify(err))
				return
			}
			pages[i].more = len(out.LastEvaluatedKey) > 0
			pages[i].err = attributevalue.UnmarshalListOfMaps(out.Items, &pages[i].items)
		})
	}
	wg.Wait()
	var errs []error
	for _, p := range pages {
		errs = append(errs, p.err)
	}
	if err := errors.Join(errs...); err != nil {
		return Page[orders.Order]{}, fmt.Errorf("list open orders %s: %w", status, err)
	}

	// k-way merge: take the smallest head until the page is full.
	heads := make([]int, n)
	page := Page[orders.Order]{Items: []orders.Order{}}
	// taken[k] is every shard's position once the first k+1 items are
	// taken: a page cut after them continues there (a shard found done
	// only later is read once more, and answers nothing).
	var taken [][]ShardPosition
	page.Cut = func(k int) *Position { return &Position{Shards: taken[k-1]} }
	for len(page.Items) < want {
		best := -1
		for i := range n {
			if heads[i] >= len(pages[i].items) {
				if pages[i].more {
					// This shard's page stopped short of the limit (1 MB):
					// its next order may be older than every head here, so
					// the page ends, and the next one reads on from it.
					best = -1
					break
				}
				continue
			}
			if best < 0 || less(pages[i].items[heads[i]], pages[best].items[heads[best]]) {
				best = i
			}
		}
		if best < 0 {
			break
		}
		o := pages[best].items[heads[best]]
		heads[best]++
		page.Items = append(page.Items, o)
		pos[best].After = map[string]string{"openShard": o.OpenShard, "orderId": o.OrderID, "userId": o.UserID}
		taken = append(taken, slices.Clone(pos))
	}
	more := false
	for i := range n {
		if pos[i].Done {
			continue
		}
		if heads[i] == len(pages[i].items) && !pages[i].more {
			pos[i].Done = true
			continue
		}
		more = true
	}
	if more {
		page.Next = &Position{Shards: pos}
	}
	return page, nil
}

func less(a, b orders.Order) bool {
	if a.OrderID != b.OrderID {
		return a.OrderID < b.OrderID
	}
	return a.UserID < b.UserID
}
