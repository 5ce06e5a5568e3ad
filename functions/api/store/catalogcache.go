package store

import (
	"sync"
	"time"

	"github.com/shopstream/shopstream/shared/products"
)

// DefaultCatalogCacheTTL is how long a product page may reuse a catalog item
// it read (Config.CatalogCacheTTL): well inside the 5 s that the page's
// Cache-Control already gives every cache.
const DefaultCatalogCacheTTL = time.Second

// catalogCacheSize bounds the cache (a catalog item is at most about 25 KB:
// 25 MB): past it, expired entries go, and if none has, everything does.
// The products that pages ask for many times a second are what it is for.
const catalogCacheSize = 1_000

// catalogCache keeps the catalog items of one-bucket products that product
// pages read, with the bucket read beside them in the same request, so that
// the next page of the same product within the TTL reads only its stock
// bucket. It answers from the cache only while the bucket is as it was
// (version, units, name and price): the page is then the one answered
// before, repeated, never an older catalog item joined to a newer bucket.
type catalogCache struct {
	ttl time.Duration

	mu    sync.Mutex
	items map[string]cachedCatalog
	// writes counts this instance's catalog writes: a read that began
	// before one is not kept, since it may predate the write.
	writes uint64
	// least is, by product, the catalog version this instance last wrote:
	// a read of an older one (a replica behind) is not kept.
	least map[string]int64
	// wroteAt is, by product, when this instance last wrote its catalog
	// item: its pages read strongly consistent for OwnReads after that.
	wroteAt map[string]time.Time
}

// OwnReads is how long after this instance's own write of a product its
// pages read strongly consistent, so that the write shows at once there
// (an eventually consistent read may miss it; AWS gives the lag no bound).
const OwnReads = time.Second

type cachedCatalog struct {
	p  products.Product // the catalog item alone: no stock, its own version
	b  bucket           // bucket 0 as read with it
	at time.Time
}

func newCatalogCache(ttl time.Duration) *catalogCache {
	if ttl <= 0 {
		return nil
	}
	return &catalogCache{ttl: ttl, items: map[string]cachedCatalog{}, least: map[string]int64{}, wroteAt: map[string]time.Time{}}
}

// get returns the catalog item of id and its bucket read within the TTL.
func (c *catalogCache) get(id string) (cachedCatalog, bool) {
	if c == nil {
		return cachedCatalog{}, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.items[id]
	if !ok || time.Since(e.at) >= c.ttl {
		return cachedCatalog{}, false
	}
	return e, true
}

// generation is the count of writes so far, taken before a read.
func (c *catalogCache) generation() uint64 {
	if c == nil {
		return 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.writes
}

// put keeps p, the catalog item of id, and b, its bucket, as read from
// readAt on, unless this instance wrote a catalog item since (gen, taken
// before the read).
func (c *catalogCache) put(id string, p products.Product, b bucket, readAt time.Time, gen uint64) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.writes != gen || p.Version < c.least[id] {
		return
	}
	if len(c.items) >= catalogCacheSize {
		for k, e := range c.items {
			if time.Since(e.at) >= c.ttl {
				delete(c.items, k)
			}
		}
		if len(c.items) >= catalogCacheSize {
			clear(c.items)
		}
	}
	c.items[id] = cachedCatalog{p: p, b: b, at: readAt}
}

// forget drops id: this instance is writing its catalog item.
func (c *catalogCache) forget(id string) {
	if c == nil {
		return
	}
	c.mu.Lock()
	delete(c.items, id)
	c.writes++
	if len(c.wroteAt) >= catalogCacheSize {
		for k, at := range c.wroteAt {
			if time.Since(at) >= OwnReads {
				delete(c.wroteAt, k)
			}
		}
	}
	c.wroteAt[id] = time.Now()
	c.mu.Unlock()
}

// ownRecent says whether this instance wrote id's catalog item within
// OwnReads.
func (c *catalogCache) ownRecent(id string) bool {
	if c == nil {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	at, ok := c.wroteAt[id]
	return ok && time.Since(at) < OwnReads
}

// wrote records that this instance wrote version v of id's catalog item.
func (c *catalogCache) wrote(id string, v int64) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.least) >= catalogCacheSize {
		clear(c.least) // a second later no replica is that far behind
	}
	c.least[id] = v
}

// drop removes an entry that no longer answers (its bucket moved).
func (c *catalogCache) drop(id string) {
	if c == nil {
		return
	}
	c.mu.Lock()
	delete(c.items, id)
	c.mu.Unlock()
}
