// Package shapes holds the version of every item kind's stored shape: the
// number each writer puts in an item's "shape" attribute, and the rule for
// items written before shapes were recorded (they carry none, and are shape
// 1 unless their kind says how to tell; see products.Product.ShapeVersion).
// A reader accepts every shape a supported upgrade can leave behind; a new
// shape ships as expand, migrate, contract (docs/deploy.md), and
// docs/data-model.md lists which releases write and read each one.
package shapes

// Attr is the attribute an item carries its shape version in.
const Attr = "shape"

// The shape each item kind is written in by this release. Products are in
// package products (products.Shape): theirs is the one that has changed.
const (
	User           = 1
	UserEmail      = 1
	StockBucket    = 1
	Review         = 1
	Cart           = 1
	Order          = 1
	IdempotencyKey = 1
	CounterMarker  = 1
	Migration      = 1
)
