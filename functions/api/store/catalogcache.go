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
	// repeat is how long a page whose bucket was read is answered again
	// with no read at all (Config.PageRepeat; 0: always read the bucket).
	repeat time.Duration

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
	// soldAt is, by product, when this instance last sold from its stock
	// (or gave units back): a read that began before is not kept, and its
	// pages read strongly consistent for OwnReads after.
	soldAt map[string]time.Time
}

// OwnReads is how long after this instance's own write of a product its
// pages read strongly consistent, so that the write shows at once there
// (an eventually consistent read may miss it; AWS gives the lag no bound).
const OwnReads = time.Second

type cachedCatalog struct {
	// p is the catalog item alone (no stock, its own version), or the
	// whole page when whole is set.
	p products.Product
	// whole marks the page of a product of several buckets (its buckets
	// read in one consistent BatchGetItem, or as of one instant across a
	// respread): it is repeated within the repeat window only.
	whole bool
	b     bucket    // bucket 0 as read with the catalog item (not whole)
	at    time.Time // when the pair was read
	// seen is when a read of bucket 0 that began then last found it as b.
	seen time.Time
}

// DefaultPageRepeat is how long a product page is repeated with no read
// at all once a read found its bucket as cached (Config.PageRepeat): a
// popular page then costs its bucket's partition one read per instance
// every 100 ms instead of one per view (docs/decisions.md, "A product page
// repeated for 100 ms").
const DefaultPageRepeat = 100 * time.Millisecond

func newCatalogCache(ttl, repeat time.Duration) *catalogCache {
	if ttl <= 0 {
		return nil
	}
	return &catalogCache{ttl: ttl, repeat: max(repeat, 0), items: map[string]cachedCatalog{}, least: map[string]int64{}, wroteAt: map[string]time.Time{}, soldAt: map[string]time.Time{}}
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
	if c.writes != gen || p.Version < c.least[id] || !readAt.After(c.soldAt[id]) {
		return
	}
	c.make()
	c.items[id] = cachedCatalog{p: p, b: b, at: readAt, seen: readAt}
}

// page is the page e answers.
func (e cachedCatalog) page() products.Product {
	p := e.p
	if !e.whole {
		p.Stock, p.Version = e.b.Units, p.Version+e.b.Version
	}
	return p
}

// putPage keeps p, the whole page of id (a product of several buckets)
// whose catalog item was at version catalog, as read from readAt on, for
// the repeat window, on the same terms as put.
func (c *catalogCache) putPage(id string, p products.Product, catalog int64, readAt time.Time, gen uint64) {
	if c == nil || c.repeat <= 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.writes != gen || catalog < c.least[id] || !readAt.After(c.soldAt[id]) {
		return
	}
	c.make()
	c.items[id] = cachedCatalog{p: p, whole: true, at: readAt, seen: readAt}
}

// make makes room for an entry. Callers hold c.mu.
func (c *catalogCache) make() {
	if len(c.items) < catalogCacheSize {
		return
	}
	for k, e := range c.items {
		if time.Since(e.at) >= c.ttl {
			delete(c.items, k)
		}
	}
	if len(c.items) >= catalogCacheSize {
		clear(c.items)
	}
}

// fresh says whether e's bucket was found as cached within the repeat
// window: the page may be answered again with no read.
func (c *catalogCache) fresh(e cachedCatalog) bool {
	return c != nil && c.repeat > 0 && time.Since(e.seen) < c.repeat
}

// confirm records that a read of id's bucket that began at readAt found it
// as cached.
func (c *catalogCache) confirm(id string, b bucket, readAt time.Time) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.items[id]; ok && e.b == b && readAt.After(e.seen) && readAt.After(c.soldAt[id]) {
		e.seen = readAt
		c.items[id] = e
	}
}

// sold records that this instance sold from id's stock, or gave units back
// to it, whatever the write's answer: its next page reads the bucket, a read
// that began before now is not kept, and the pages read strongly consistent
// for OwnReads, so that the sale shows on this instance at once and a
// replica behind it cannot open a window on the stock before it.
func (c *catalogCache) sold(id string) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.items[id]; ok {
		e.seen = time.Time{}
		c.items[id] = e
	}
	stamp(c.soldAt, id)
}

// stamp records now for id in m, first dropping what is past OwnReads when m
// is full. Callers hold c.mu.
func stamp(m map[string]time.Time, id string) {
	if len(m) >= catalogCacheSize {
		for k, at := range m {
			if time.Since(at) >= OwnReads {
				delete(m, k)
			}
		}
	}
	m[id] = time.Now()
}

// recent says whether m holds id from within OwnReads.
func recent(m map[string]time.Time, id string) bool {
	at, ok := m[id]
	return ok && time.Since(at) < OwnReads
}

// forget drops id: this instance is writing its catalog item.
func (c *catalogCache) forget(id string) {
	if c == nil {
		return
	}
	c.mu.Lock()
	delete(c.items, id)
	c.writes++
	stamp(c.wroteAt, id)
	c.mu.Unlock()
}

// ownRecent says whether this instance wrote id's catalog item, or sold
// from its stock, within OwnReads: its pages then read strongly
// consistent, so that what it did shows on it at once.
func (c *catalogCache) ownRecent(id string) bool {
	if c == nil {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return recent(c.wroteAt, id) || recent(c.soldAt, id)
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
