// Package carts holds what a cart is and its rules: one cart per user holding
// its lines by product, a bounded number of lines (so a cart always fits one
// order transaction), and an expiry renewed by every touch.
package carts

import (
	"encoding/json"
	"sort"

	"github.com/shopstream/shopstream/shared/clock"
	"github.com/shopstream/shopstream/shared/errcode"
)

// Limits of a cart. MaxLines keeps an order placed from a full cart within one
// TransactWriteItems (100 actions: the order, one per line, the cart and the
// idempotency key).
const (
	MaxLines    = 50
	MaxQuantity = 1000
)

// Line is one product in a cart.
type Line struct {
	Quantity int    `json:"quantity" dynamodbav:"quantity"`
	AddedAt  string `json:"addedAt" dynamodbav:"addedAt"`
}

// Cart is a user's cart as stored: lines keyed by product id.
type Cart struct {
	UserID    string          `dynamodbav:"userId"`
	Lines     map[string]Line `dynamodbav:"lines"`
	UpdatedAt string          `dynamodbav:"updatedAt"`
	ExpiresAt clock.Epoch     `dynamodbav:"expiresAt"`
	Version   int64           `dynamodbav:"version"`
	// Shape is the version of the item's stored shape; absent on items
	// written before shapes were recorded, which are shape 1.
	Shape int `dynamodbav:"shape,omitempty"`
}

// Input is the body of a cart line write.
type Input struct {
	Quantity *int `json:"quantity"`
}

// Validate returns an errcode.Invalid error listing every invalid field.
func (in Input) Validate() error {
	var f errcode.Fields
	switch {
	case in.Quantity == nil:
		f.Add("quantity", "is required")
	case *in.Quantity < 0 || *in.Quantity > MaxQuantity:
		f.Add("quantity", "must be from 0 to %d", MaxQuantity)
	}
	return f.Err()
}

// Set puts quantity of productID in the cart (0 removes the line). It returns
// an errcode.Conflict error when the cart would exceed MaxLines.
func (c *Cart) Set(productID string, quantity int, now string) error {
	if c.Lines == nil {
		c.Lines = map[string]Line{}
	}
	if quantity == 0 {
		delete(c.Lines, productID)
		return nil
	}
	l, ok := c.Lines[productID]
	if !ok {
		if len(c.Lines) >= MaxLines {
			return errcode.Errorf(errcode.Conflict, "a cart holds at most %d products", MaxLines)
		}
		l.AddedAt = now
	}
	l.Quantity = quantity
	c.Lines[productID] = l
	return nil
}

// ProductIDs returns the products of the cart in the order they were added.
func (c *Cart) ProductIDs() []string {
	ids := make([]string, 0, len(c.Lines))
	for id := range c.Lines {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool {
		a, b := c.Lines[ids[i]], c.Lines[ids[j]]
		if a.AddedAt != b.AddedAt {
			return a.AddedAt < b.AddedAt
		}
		return ids[i] < ids[j]
	})
	return ids
}

// View is a cart as the API shows it: lines with current product name and
// price.
type View struct {
	UserID     string      `json:"userId"`
	Lines      []ViewLine  `json:"lines"`
	TotalCents int64       `json:"totalCents"`
	ExpiresAt  clock.Epoch `json:"expiresAt,omitempty"`
	Version    int64       `json:"version"`
}

// ViewLine is one line of a View.
type ViewLine struct {
	ProductID      string `json:"productId"`
	ProductName    string `json:"productName"`
	UnitPriceCents int64  `json:"unitPriceCents"`
	Quantity       int    `json:"quantity"`
	LineTotalCents int64  `json:"lineTotalCents"`
	AddedAt        string `json:"addedAt"`
	// Available is false for a line whose product no longer exists: it is
	// shown (no name, no price, outside the total) so that the client can
	// see why an order from the cart names it and take it out (quantity 0).
	Available bool `json:"available"`
}

// MarshalJSON writes an available line whole, and an unavailable one
// without name, price or line total (its product is gone: a name "" and a
// price 0 would read as a free product without a name).
func (l ViewLine) MarshalJSON() ([]byte, error) {
	type whole ViewLine
	if l.Available {
		return json.Marshal(whole(l))
	}
	return json.Marshal(struct {
		ProductID string `json:"productId"`
		Quantity  int    `json:"quantity"`
		AddedAt   string `json:"addedAt"`
		Available bool   `json:"available"`
	}{l.ProductID, l.Quantity, l.AddedAt, false})
}
