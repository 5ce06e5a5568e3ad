// Package products holds what a product is and the rules for creating and
// changing one. Review and sales counters are kept by the counters processor;
// the average rating is derived from the stored rating total.
package products

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/shopstream/shopstream/shared/errcode"
	"github.com/shopstream/shopstream/shared/text"
)

// Limits of product fields.
const (
	MaxNameLen        = 200
	MaxDescriptionLen = 5000
	MaxCategoryLen    = 100
	MaxPriceCents     = 100_000_000 // one million in the currency's main unit
	MaxStock          = 1_000_000_000
	// MaxStockBuckets bounds the items a product's stock is split over
	// (write sharding): a change of every bucket stays one transaction.
	MaxStockBuckets = 32
)

// Product is an item for sale.
type Product struct {
	ProductID   string `json:"productId" dynamodbav:"productId"`
	Name        string `json:"name" dynamodbav:"name"`
	Description string `json:"description" dynamodbav:"description"`
	Category    string `json:"category" dynamodbav:"category"`
	PriceCents  int64  `json:"priceCents" dynamodbav:"priceCents"`
	// Stock is the total of the product's stock buckets and of its
	// CatalogStock; a sale writes only a bucket (or, while a shape-1 item
	// holds CatalogStock, that).
	Stock int64 `json:"stock" dynamodbav:"-"`
	// CatalogStock is stock still held on the catalog item, where releases
	// before 0.2.0 kept it (shape 1); nil once it is moved into the buckets,
	// by `make migrate` or by the product's next change.
	CatalogStock *int64 `json:"-" dynamodbav:"stock,omitempty"`
	// StockBuckets is the number of items the stock is split over, on
	// distinct partition keys, so that sales of one product spread over
	// that many partitions.
	StockBuckets int `json:"stockBuckets" dynamodbav:"stockBuckets"`
	// Counters, written only by the counters processor.
	ReviewCount int64 `json:"reviewCount" dynamodbav:"reviewCount,omitempty"`
	RatingTotal int64 `json:"-" dynamodbav:"ratingTotal,omitempty"`
	UnitsSold   int64 `json:"unitsSold" dynamodbav:"unitsSold,omitempty"`
	// RatingAverage is derived by Derive; nil when there is no review.
	RatingAverage *float64 `json:"ratingAverage" dynamodbav:"-"`
	CreatedAt     string   `json:"createdAt" dynamodbav:"createdAt"`
	UpdatedAt     string   `json:"updatedAt" dynamodbav:"updatedAt"`
	Version       int64    `json:"version" dynamodbav:"version"`
	// Shape is the version of the item's stored shape (see ShapeVersion).
	Shape int `json:"-" dynamodbav:"shape,omitempty"`
}

// Shape versions of a catalog item: 1 holds the stock itself (releases
// 0.1.x), 2 keeps it in stock buckets (0.2.0 on). Items written before
// shapes were recorded carry none; ShapeVersion tells them apart.
const (
	ShapeCatalogStock = 1
	ShapeBuckets      = 2
	// Shape is the shape this release writes.
	Shape = ShapeBuckets
)

// ShapeVersion is the shape p was stored in: the recorded one, else 1 when
// the catalog item holds stock, else 2.
func (p Product) ShapeVersion() int {
	switch {
	case p.Shape != 0:
		return p.Shape
	case p.CatalogStock != nil:
		return ShapeCatalogStock
	}
	return ShapeBuckets
}

// Derive fills the derived fields from the stored ones.
func (p *Product) Derive() {
	p.RatingAverage = nil
	if p.ReviewCount > 0 {
		avg := float64(p.RatingTotal) / float64(p.ReviewCount)
		p.RatingAverage = &avg
	}
}

// New is the body of a product creation.
type New struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	Category    string `json:"category"`
	PriceCents  *int64 `json:"priceCents"`
	Stock       *int64 `json:"stock"`
	// StockBuckets is 1 when absent.
	StockBuckets *int `json:"stockBuckets"`
}

// Patch is the body of a product change; nil fields stay as they are. Stock
// changes by StockDelta (units added, or removed when negative), applied
// atomically, so orders placed meanwhile keep their decrements; an absolute
// Stock replaces whatever sales happened since it was read, so it needs the
// version it was read at (If-Match).
type Patch struct {
	Name        *string `json:"name"`
	Description *string `json:"description"`
	Category    *string `json:"category"`
	PriceCents  *int64  `json:"priceCents"`
	Stock       *int64  `json:"stock"`
	StockDelta  *int64  `json:"stockDelta"`
	// StockBuckets respreads the stock over that many buckets, evenly.
	StockBuckets *int `json:"stockBuckets"`
}

// Validate returns an errcode.Invalid error listing every invalid field.
func (n New) Validate() error {
	var f errcode.Fields
	checkText(&f, "name", n.Name, MaxNameLen, true, text.Line)
	checkText(&f, "description", n.Description, MaxDescriptionLen, false, text.Block)
	checkCategory(&f, n.Category)
	checkNumber(&f, "priceCents", n.PriceCents, MaxPriceCents, true)
	checkNumber(&f, "stock", n.Stock, MaxStock, true)
	checkBuckets(&f, n.StockBuckets)
	return f.Err()
}

// Validate returns an errcode.Invalid error listing every invalid field.
func (p Patch) Validate() error {
	var f errcode.Fields
	if p.Name == nil && p.Description == nil && p.Category == nil && p.PriceCents == nil && p.Stock == nil && p.StockDelta == nil && p.StockBuckets == nil {
		f.Add("", "at least one field is required")
	}
	switch d := p.StockDelta; {
	case d != nil && p.Stock != nil:
		f.Add("stockDelta", "cannot be sent with stock")
	case d != nil && (*d < -MaxStock || *d > MaxStock):
		f.Add("stockDelta", "must be from %d to %d", -MaxStock, MaxStock)
	}
	if p.Name != nil {
		checkText(&f, "name", *p.Name, MaxNameLen, true, text.Line)
	}
	if p.Description != nil {
		checkText(&f, "description", *p.Description, MaxDescriptionLen, false, text.Block)
	}
	if p.Category != nil {
		checkCategory(&f, *p.Category)
	}
	checkNumber(&f, "priceCents", p.PriceCents, MaxPriceCents, false)
	checkNumber(&f, "stock", p.Stock, MaxStock, false)
	checkBuckets(&f, p.StockBuckets)
	return f.Err()
}

// ValidCategory reports whether c can name a category in a ?category=
// filter: any category a product may hold, those written by earlier
// releases included (whose text rules were looser), so a stored category
// can always be listed. A new category meets checkCategory.
func ValidCategory(c string) bool { return CategoryFilterProblem(c) == "" }

// CategoryFilterProblem says what keeps c from naming a category in a
// ?category= filter (ValidCategory), "" when nothing does.
func CategoryFilterProblem(c string) string {
	switch {
	case c == "":
		return "is required"
	case len(c) > MaxCategoryLen:
		return fmt.Sprintf("is longer than %d bytes", MaxCategoryLen)
	case c != strings.TrimSpace(c) || !utf8.ValidString(c):
		return "must be trimmed UTF-8 text"
	}
	return ""
}

// checkText checks v as field: present when required, UTF-8 of at most max
// characters, and as rule (text.Line or text.Block) says.
func checkText(f *errcode.Fields, field, v string, max int, required bool, rule func(string) string) {
	switch {
	case required && strings.TrimSpace(v) == "":
		f.Add(field, "is required")
	case !utf8.ValidString(v):
		f.Add(field, "is not valid UTF-8")
	case utf8.RuneCountInString(v) > max:
		f.Add(field, "is longer than %d characters", max)
	case rule(v) != "":
		f.Add(field, "%s", rule(v))
	}
}

func checkCategory(f *errcode.Fields, c string) {
	switch {
	case c == "":
		f.Add("category", "is required")
	case len(c) > MaxCategoryLen:
		f.Add("category", "is longer than %d bytes", MaxCategoryLen)
	case c != strings.TrimSpace(c) || !utf8.ValidString(c):
		f.Add("category", "must be trimmed UTF-8 text")
	case text.Line(c) != "":
		f.Add("category", "%s", text.Line(c))
	}
}

func checkBuckets(f *errcode.Fields, n *int) {
	if n != nil && (*n < 1 || *n > MaxStockBuckets) {
		f.Add("stockBuckets", "must be from 1 to %d", MaxStockBuckets)
	}
}

func checkNumber(f *errcode.Fields, field string, v *int64, max int64, required bool) {
	switch {
	case v == nil:
		if required {
			f.Add(field, "is required")
		}
	case *v < 0:
		f.Add(field, "must not be negative")
	case *v > max:
		f.Add(field, "must be at most %d", max)
	}
}
