// Package orders holds what an order is and what it may do: the request rules
// (lines merged by product, bounded in number and quantity), the status
// machine PLACED → SHIPPED → DELIVERED with cancellation only from PLACED, and
// the write-sharded key of the open-orders index.
package orders

import (
	"fmt"
	"hash/fnv"
	"sort"
	"strings"

	"github.com/shopstream/shopstream/shared/clock"
	"github.com/shopstream/shopstream/shared/errcode"
	"github.com/shopstream/shopstream/shared/ulid"
)

// Limits of an order. MaxLines keeps an order within one TransactWriteItems
// (100 actions: the order, one per line, the cart and the idempotency key)
// when each line takes its units from one stock bucket; a line that
// needs several buckets takes one action per bucket, and an order whose
// actions then pass 100 is refused as a conflict (the store's PlaceOrder).
const (
	MaxLines    = 50
	MaxQuantity = 1000
)

// Status is where an order is in its life.
type Status string

// Statuses.
const (
	Placed    Status = "PLACED"
	Shipped   Status = "SHIPPED"
	Delivered Status = "DELIVERED"
	Cancelled Status = "CANCELLED"
)

// Valid reports whether s is a status.
func (s Status) Valid() bool {
	switch s {
	case Placed, Shipped, Delivered, Cancelled:
		return true
	}
	return false
}

// Open reports whether an order in s is still being fulfilled: open orders are
// in the open-orders index; closed ones expire into the archive.
func (s Status) Open() bool { return s == Placed || s == Shipped }

// CanMove reports whether an admin may move an order from one status to
// another: only forward along PLACED → SHIPPED → DELIVERED.
func CanMove(from, to Status) bool {
	return (from == Placed && to == Shipped) || (from == Shipped && to == Delivered)
}

// Line is one product of an order, with the name and unit price it was sold at.
type Line struct {
	ProductID      string `json:"productId" dynamodbav:"productId"`
	ProductName    string `json:"productName" dynamodbav:"productName"`
	UnitPriceCents int64  `json:"unitPriceCents" dynamodbav:"unitPriceCents"`
	Quantity       int    `json:"quantity" dynamodbav:"quantity"`
}

// Order is a placed order.
type Order struct {
	UserID     string `json:"userId" dynamodbav:"userId"`
	OrderID    string `json:"orderId" dynamodbav:"orderId"`
	Status     Status `json:"status" dynamodbav:"status"`
	Lines      []Line `json:"lines" dynamodbav:"lines"`
	TotalCents int64  `json:"totalCents" dynamodbav:"totalCents"`
	CreatedAt  string `json:"createdAt" dynamodbav:"createdAt"`
	UpdatedAt  string `json:"updatedAt" dynamodbav:"updatedAt"`
	Version    int64  `json:"version" dynamodbav:"version"`
	// Shape is the version of the item's stored shape; absent on items
	// written before shapes were recorded, which are shape 1.
	Shape int `json:"-" dynamodbav:"shape,omitempty"`
	// ExpiresAt is set when the order closes (DELIVERED, CANCELLED): TTL then
	// moves it to the archive.
	ExpiresAt clock.Epoch `json:"expiresAt,omitempty" dynamodbav:"expiresAt,omitempty"`
	// OpenShard is the open-orders index key; present only while the order is open.
	OpenShard string `json:"-" dynamodbav:"openShard,omitempty"`
}

// Total returns the sum of the lines.
func Total(lines []Line) int64 {
	var t int64
	for _, l := range lines {
		t += l.UnitPriceCents * int64(l.Quantity)
	}
	return t
}

// Item is one requested product.
type Item struct {
	ProductID string `json:"productId"`
	Quantity  int    `json:"quantity"`
}

// Request is the body of an order placement: explicit items or the cart.
type Request struct {
	Items    []Item `json:"items"`
	FromCart bool   `json:"fromCart"`
}

// Validate returns an errcode.Invalid error listing every invalid field.
func (r Request) Validate() error {
	var f errcode.Fields
	switch {
	case r.FromCart && len(r.Items) > 0:
		f.Add("items", "must be absent when fromCart is true")
	case !r.FromCart && len(r.Items) == 0:
		f.Add("items", "is required (or fromCart: true)")
	case len(r.Items) > MaxLines*4:
		f.Add("items", "has more than %d entries", MaxLines*4)
	}
	for i, it := range r.Items {
		if len(f) >= 20 {
			break
		}
		if strings.TrimSpace(it.ProductID) == "" || len(it.ProductID) > 64 {
			f.Add(fmt.Sprintf("items[%d].productId", i), "is required, at most 64 bytes")
		}
		if it.Quantity < 1 || it.Quantity > MaxQuantity {
			f.Add(fmt.Sprintf("items[%d].quantity", i), "must be from 1 to %d", MaxQuantity)
		}
	}
	if err := f.Err(); err != nil {
		return err
	}
	if _, err := Merge(r.Items); err != nil {
		return err
	}
	return nil
}

// ValidateIDs returns an errcode.Invalid error naming each item whose
// productId no product can have: product ids are ULIDs the API made. Such
// an item is the client's mistake, not a product "no longer available",
// and its id is not echoed back. It is separate from Validate because the
// release before 0.19.0 answered such an order 409, and an Idempotency-Key
// may hold that answer: the API checks ids after the key's replay.
func (r Request) ValidateIDs() error {
	var f errcode.Fields
	for i, it := range r.Items {
		if len(f) >= 20 {
			break
		}
		if !ulid.Valid(it.ProductID) {
			f.Add(fmt.Sprintf("items[%d].productId", i), "is not a product id (a ULID)")
		}
	}
	return f.Err()
}

// Merge sums the quantities of items naming one product (a transaction may
// touch an item once) and returns them by product id. It returns an
// errcode.Invalid error when a merged quantity or the number of products is out
// of bounds.
func Merge(items []Item) ([]Item, error) {
	sum := map[string]int{}
	for _, it := range items {
		sum[it.ProductID] += it.Quantity
	}
	var f errcode.Fields
	if len(sum) > MaxLines {
		f.Add("items", "names more than %d products", MaxLines)
	}
	out := make([]Item, 0, len(sum))
	for id, q := range sum {
		if q > MaxQuantity {
			f.Add("items", "product %s: total quantity above %d", id, MaxQuantity)
		}
		out = append(out, Item{ProductID: id, Quantity: q})
	}
	if err := f.Err(); err != nil {
		return nil, err
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ProductID < out[j].ProductID })
	return out, nil
}

// StatusChange is the body of an admin status move.
type StatusChange struct {
	Status Status `json:"status"`
}

// Validate returns an errcode.Invalid error listing every invalid field.
func (s StatusChange) Validate() error {
	var f errcode.Fields
	if !s.Status.Valid() {
		f.Add("status", "must be one of PLACED, SHIPPED, DELIVERED, CANCELLED")
	}
	return f.Err()
}

// Shard returns the write shard of an order in the open-orders index: a hash
// of the order id, so one status's orders spread over n partitions.
func Shard(orderID string, n int) int {
	h := fnv.New32a()
	h.Write([]byte(orderID))
	return int(h.Sum32() % uint32(n))
}

// OpenKey returns the open-orders index partition of a status and shard.
func OpenKey(s Status, shard int) string { return fmt.Sprintf("%s#%d", s, shard) }
