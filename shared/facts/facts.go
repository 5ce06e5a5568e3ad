// Package facts names the business facts the denormalized counters account
// for (an order placed, an order cancelled, a review version counted in or
// taken out) and their effects on the counter items. The counters processor
// derives them from stream records, the audit from the tables and the
// archive; both write a fact's marker through the same conditional
// transaction, so a fact is applied once whoever comes first
// (docs/counters.md).
package facts

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// Kind is the kind of a counter item.
type Kind string

// Kinds of counter items.
const (
	User    Kind = "user"
	Product Kind = "product"
)

// Every fact's key starts with one of these: the counters' role may write
// markers under them only (dynamodb:LeadingKeys, infra/cdk/stack).
const (
	OrderKeyPrefix  = "order#"
	ReviewKeyPrefix = "review#"
)

// KeyPrefixes are the prefixes of every fact's key.
func KeyPrefixes() []string { return []string{OrderKeyPrefix, ReviewKeyPrefix} }

// Item names one counter item: a user or a product.
type Item struct {
	Kind Kind
	ID   string
}

func (it Item) String() string { return string(it.Kind) + "/" + it.ID }

// ParseItem reads Item.String's form.
func ParseItem(s string) (Item, error) {
	kind, id, ok := strings.Cut(s, "/")
	if !ok || id == "" || (Kind(kind) != User && Kind(kind) != Product) {
		return Item{}, fmt.Errorf("counter item %q: want user/<id> or product/<id>", s)
	}
	return Item{Kind(kind), id}, nil
}

// Effects are what a fact adds to each counter of each item it touches.
type Effects map[Item]map[string]int64

// Add adds n to counter of it.
func (e Effects) Add(it Item, counter string, n int64) {
	c := e[it]
	if c == nil {
		c = map[string]int64{}
		e[it] = c
	}
	c[counter] += n
}

// Negated returns the opposite effects.
func (e Effects) Negated() Effects {
	out := Effects{}
	for it, cs := range e {
		for c, n := range cs {
			out.Add(it, c, -n)
		}
	}
	return out
}

// Items returns the items the effects touch, sorted.
func (e Effects) Items() []Item {
	out := make([]Item, 0, len(e))
	for it := range e {
		out = append(out, it)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	return out
}

// Fact is one business fact with its effects.
type Fact struct {
	Key     string
	Effects Effects
}

// MaxLines bounds an order's distinct products a fact may touch; with the
// user, a fact touches at most MaxLines+1 items.
const MaxLines = 98

// Order is what the counters read of an order.
type Order struct {
	UserID     string `dynamodbav:"userId" json:"userId"`
	OrderID    string `dynamodbav:"orderId" json:"orderId"`
	Status     string `dynamodbav:"status" json:"status"`
	TotalCents int64  `dynamodbav:"totalCents" json:"totalCents"`
	Lines      []Line `dynamodbav:"lines" json:"lines"`
}

// Line is one line of an order.
type Line struct {
	ProductID string `dynamodbav:"productId" json:"productId"`
	Quantity  int64  `dynamodbav:"quantity" json:"quantity"`
}

// Cancelled is an order's status once cancelled.
const Cancelled = "CANCELLED"

// Check applies the counters' rules to an order.
func (o Order) Check() error {
	if o.UserID == "" || o.OrderID == "" || len(o.Lines) == 0 {
		return errors.New("order without user, id or lines")
	}
	products := map[string]bool{}
	for _, l := range o.Lines {
		if l.ProductID == "" || l.Quantity < 1 {
			return errors.New("order line without product or quantity")
		}
		products[l.ProductID] = true
	}
	if len(products) > MaxLines {
		return fmt.Errorf("order of %d products: more than one transaction holds", len(products))
	}
	return nil
}

func (o Order) effects(sign int64) Effects {
	e := Effects{}
	user := Item{User, o.UserID}
	if sign > 0 {
		e.Add(user, "orderCount", 1)
	}
	e.Add(user, "lifetimeSpendCents", sign*o.TotalCents)
	for _, l := range o.Lines {
		e.Add(Item{Product, l.ProductID}, "unitsSold", sign*l.Quantity)
	}
	return e
}

// Placed is the order's placement: the user's orderCount +1 and spend
// +total, each product's unitsSold +quantity.
func Placed(o Order) Fact {
	return Fact{Key: OrderKeyPrefix + o.OrderID + "#placed", Effects: o.effects(1)}
}

// CancelledFact is the order's cancellation: the user's spend −total, each
// product's unitsSold −quantity.
func CancelledFact(o Order) Fact {
	return Fact{Key: OrderKeyPrefix + o.OrderID + "#cancelled", Effects: o.effects(-1)}
}

// OfOrder returns the facts an order in the table or the archive proves:
// placed, and cancelled when its status says so.
func OfOrder(o Order) []Fact {
	out := []Fact{Placed(o)}
	if o.Status == Cancelled {
		out = append(out, CancelledFact(o))
	}
	return out
}

// Review is what the counters read of a review: one instance per product,
// user and createdAt (a review deleted and written again is a new
// instance), at a version.
type Review struct {
	ProductID string `dynamodbav:"productId" json:"productId"`
	UserID    string `dynamodbav:"userId" json:"userId"`
	CreatedAt string `dynamodbav:"createdAt" json:"createdAt"`
	Version   int64  `dynamodbav:"version" json:"version"`
	Rating    int64  `dynamodbav:"rating" json:"rating"`
}

// Check applies the counters' rules to a review.
func (r Review) Check() error {
	if r.ProductID == "" || r.UserID == "" || r.CreatedAt == "" || r.Version < 1 || r.Rating < 1 || r.Rating > 5 {
		return errors.New("review without product, user, createdAt, a version or a rating in 1..5")
	}
	return nil
}

// Instance names the review instance: product, user and createdAt.
func (r Review) Instance() string {
	return ReviewKeyPrefix + r.ProductID + "#" + r.UserID + "#" + r.CreatedAt
}

func (r Review) effects(sign int64) Effects {
	e := Effects{}
	e.Add(Item{User, r.UserID}, "reviewCount", sign)
	e.Add(Item{Product, r.ProductID}, "reviewCount", sign)
	e.Add(Item{Product, r.ProductID}, "ratingTotal", sign*r.Rating)
	return e
}

// InKey and OutKey are the keys of a review version counted in and taken out.
func InKey(instance string, version int64) string {
	return instance + "#v" + strconv.FormatInt(version, 10) + "#in"
}

// OutKey is the key of a review version taken out.
func OutKey(instance string, version int64) string {
	return instance + "#v" + strconv.FormatInt(version, 10) + "#out"
}

// In is the review's version counted in: reviewCount +1 for the user and the
// product, the product's ratingTotal +rating.
func In(r Review) Fact { return Fact{Key: InKey(r.Instance(), r.Version), Effects: r.effects(1)} }

// Out is the review's version taken out (replaced or deleted).
func Out(r Review) Fact { return Fact{Key: OutKey(r.Instance(), r.Version), Effects: r.effects(-1)} }

// ReviewKey is a review fact's key taken apart.
type ReviewKey struct {
	Instance string
	Version  int64
	In       bool
}

// ParseReviewKey takes a review fact's key apart; ok is false for any other key.
func ParseReviewKey(key string) (ReviewKey, bool) {
	if !strings.HasPrefix(key, ReviewKeyPrefix) {
		return ReviewKey{}, false
	}
	rest, dir, ok := cutLast(key, "#")
	if !ok || (dir != "in" && dir != "out") {
		return ReviewKey{}, false
	}
	instance, v, ok := cutLast(rest, "#")
	if !ok || !strings.HasPrefix(v, "v") {
		return ReviewKey{}, false
	}
	n, err := strconv.ParseInt(v[1:], 10, 64)
	if err != nil || n < 1 {
		return ReviewKey{}, false
	}
	return ReviewKey{Instance: instance, Version: n, In: dir == "in"}, true
}

func cutLast(s, sep string) (string, string, bool) {
	i := strings.LastIndex(s, sep)
	if i < 0 {
		return s, "", false
	}
	return s[:i], s[i+len(sep):], true
}
