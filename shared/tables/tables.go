// Package tables holds the one definition of every DynamoDB table of shopstream:
// keys, indexes, streams and TTL. The API, the stream processors, the local stack,
// the CDK app and template.yaml all read it; nothing declares a table twice.
package tables

import "fmt"

// AttrType is a DynamoDB key attribute type.
type AttrType string

// Key attribute types.
const (
	String AttrType = "S"
	Number AttrType = "N"
	Binary AttrType = "B"
)

// Key is one key attribute.
type Key struct {
	Name string
	Type AttrType
}

// Projection says which attributes an index copies.
type Projection struct {
	// Type is ALL, KEYS_ONLY or INCLUDE.
	Type string
	// NonKey lists the attributes an INCLUDE projection copies.
	NonKey []string
}

// Projection types.
const (
	ProjectAll      = "ALL"
	ProjectKeysOnly = "KEYS_ONLY"
	ProjectInclude  = "INCLUDE"
)

// Index is a global or local secondary index.
type Index struct {
	Name         string
	PartitionKey Key
	// SortKey is nil for an index without a sort key.
	SortKey    *Key
	Projection Projection
}

// StreamView is the stream view type of a table; "" means no stream.
type StreamView string

// Stream view types.
const (
	NoStream        StreamView = ""
	NewAndOldImages StreamView = "NEW_AND_OLD_IMAGES"
)

// Table is the definition of one table.
type Table struct {
	// Name is the logical name; Physical gives the deployed name.
	Name         string
	PartitionKey Key
	// SortKey is nil for a table without a sort key.
	SortKey       *Key
	GlobalIndexes []Index
	LocalIndexes  []Index
	Stream        StreamView
	// TTLAttribute names the epoch-seconds expiry attribute; "" means no TTL.
	TTLAttribute string
	// EnvVar is the environment variable that carries the physical name to functions.
	EnvVar string
}

// Logical table names.
const (
	Users           = "users"
	UserEmails      = "user-emails"
	Products        = "products"
	ProductStock    = "product-stock"
	Reviews         = "reviews"
	Carts           = "carts"
	Orders          = "orders"
	IdempotencyKeys = "idempotency-keys"
	CounterEvents   = "counter-events"
	Migrations      = "migrations"
)

// Index names.
const (
	ProductsByCategory = "byCategory"
	ReviewsByTime      = "byCreatedAt"
	ReviewsByUser      = "byUser"
	OrdersOpenByStatus = "openByStatus"
)

// OpenOrderShards is the number of write shards of the open-orders index.
const OpenOrderShards = 8

func sortKey(name string, t AttrType) *Key { return &Key{Name: name, Type: t} }

// All returns every table, in a stable order.
func All() []Table {
	return []Table{
		{
			Name:         Users,
			PartitionKey: Key{"userId", String},
			EnvVar:       "USERS_TABLE",
		},
		{
			Name:         UserEmails,
			PartitionKey: Key{"email", String},
			EnvVar:       "USER_EMAILS_TABLE",
		},
		{
			Name:         Products,
			PartitionKey: Key{"productId", String},
			GlobalIndexes: []Index{{
				Name:         ProductsByCategory,
				PartitionKey: Key{"category", String},
				SortKey:      sortKey("productId", String),
				Projection:   Projection{Type: ProjectAll},
			}},
			Stream: NewAndOldImages,
			EnvVar: "PRODUCTS_TABLE",
		},
		{
			// A product's stock, write-sharded (seed 003): bucket i of
			// product p is the item "p#i", one partition key each, so a
			// flash sale spreads over the product's buckets and never
			// writes the catalog item, its stream or its index.
			Name:         ProductStock,
			PartitionKey: Key{"bucketId", String},
			EnvVar:       "PRODUCT_STOCK_TABLE",
		},
		{
			Name:         Reviews,
			PartitionKey: Key{"productId", String},
			SortKey:      sortKey("userId", String),
			LocalIndexes: []Index{{
				Name:         ReviewsByTime,
				PartitionKey: Key{"productId", String},
				SortKey:      sortKey("createdAt", String),
				Projection:   Projection{Type: ProjectAll},
			}},
			GlobalIndexes: []Index{{
				Name:         ReviewsByUser,
				PartitionKey: Key{"userId", String},
				SortKey:      sortKey("createdAt", String),
				Projection:   Projection{Type: ProjectAll},
			}},
			Stream: NewAndOldImages,
			EnvVar: "REVIEWS_TABLE",
		},
		{
			Name:         Carts,
			PartitionKey: Key{"userId", String},
			Stream:       NewAndOldImages,
			TTLAttribute: "expiresAt",
			EnvVar:       "CARTS_TABLE",
		},
		{
			Name:         Orders,
			PartitionKey: Key{"userId", String},
			SortKey:      sortKey("orderId", String),
			GlobalIndexes: []Index{{
				Name:         OrdersOpenByStatus,
				PartitionKey: Key{"openShard", String},
				SortKey:      sortKey("orderId", String),
				Projection:   Projection{Type: ProjectAll},
			}},
			Stream:       NewAndOldImages,
			TTLAttribute: "expiresAt",
			EnvVar:       "ORDERS_TABLE",
		},
		{
			Name:         IdempotencyKeys,
			PartitionKey: Key{"idempotencyKey", String},
			TTLAttribute: "expiresAt",
			EnvVar:       "IDEMPOTENCY_KEYS_TABLE",
		},
		{
			Name:         CounterEvents,
			PartitionKey: Key{"eventKey", String},
			TTLAttribute: "expiresAt",
			EnvVar:       "COUNTER_EVENTS_TABLE",
		},
		{
			// The progress of each data migration (`make migrate`), one
			// item per migration: where its scan stands and whether it is
			// done. Written by the operator command only.
			Name:         Migrations,
			PartitionKey: Key{"migration", String},
			EnvVar:       "MIGRATIONS_TABLE",
		},
	}
}

// ByName returns the table with the logical name, or an error naming it.
func ByName(name string) (Table, error) {
	for _, t := range All() {
		if t.Name == name {
			return t, nil
		}
	}
	return Table{}, fmt.Errorf("table %q: not defined", name)
}

// Physical returns the deployed name of a logical table for a name prefix such
// as "shopstream-dev-" (stages) or "t42-" (tests).
func Physical(prefix, logical string) string { return prefix + logical }

// Attributes returns every key attribute of the table and its indexes, once each,
// in a stable order: what CreateTable's AttributeDefinitions need.
func (t Table) Attributes() []Key {
	var out []Key
	seen := map[string]bool{}
	add := func(k *Key) {
		if k == nil || seen[k.Name] {
			return
		}
		seen[k.Name] = true
		out = append(out, *k)
	}
	add(&t.PartitionKey)
	add(t.SortKey)
	for _, ix := range append(append([]Index(nil), t.GlobalIndexes...), t.LocalIndexes...) {
		add(&ix.PartitionKey)
		add(ix.SortKey)
	}
	return out
}
