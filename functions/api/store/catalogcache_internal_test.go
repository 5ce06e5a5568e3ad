package store

import (
	"testing"
	"time"

	"github.com/shopstream/shopstream/shared/products"
)

// TestOwnSaleNotHiddenByAReadBeforeIt: a read of a page that began before
// this instance's own sale, and answers after it with the stock as it was,
// opens no repeat window, whether it confirms a cached bucket or brings a
// fresh pair or a whole page; and the pages after the sale read strongly
// consistent for a while, so a replica behind the sale cannot open one
// either.
func TestOwnSaleNotHiddenByAReadBeforeIt(t *testing.T) {
	b := bucket{BucketID: "p#0", ProductID: "p", Units: 10, Version: 1}
	t.Run("confirm", func(t *testing.T) {
		c := newCatalogCache(time.Minute, time.Second)
		c.put("p", products.Product{ProductID: "p", Version: 1}, b, time.Now().Add(-2*time.Second), c.generation())
		readAt := time.Now() // a page's bucket read begins: it will find 10 units
		c.sold("p")          // this instance's order commits meanwhile
		c.confirm("p", b, readAt)
		if e, _ := c.get("p"); c.fresh(e) {
			t.Error("the page of the stock before the sale is repeated with no read")
		}
		if !c.ownRecent("p") {
			t.Error("no strongly consistent reads after the instance's own sale")
		}
	})
	t.Run("put", func(t *testing.T) {
		c := newCatalogCache(time.Minute, time.Second)
		gen, readAt := c.generation(), time.Now() // a full read begins
		c.sold("p")                               // no entry yet to clear
		c.put("p", products.Product{ProductID: "p", Version: 1}, b, readAt, gen)
		if e, ok := c.get("p"); ok && c.fresh(e) {
			t.Error("a pair read before the sale is repeated with no read")
		}
	})
	t.Run("whole page", func(t *testing.T) {
		c := newCatalogCache(time.Minute, time.Second)
		gen, readAt := c.generation(), time.Now()
		c.sold("p")
		c.putPage("p", products.Product{ProductID: "p", Version: 1, Stock: 40}, 1, readAt, gen)
		if e, ok := c.get("p"); ok && c.fresh(e) {
			t.Error("a whole page read before the sale is repeated with no read")
		}
	})
	t.Run("a read after the sale", func(t *testing.T) {
		c := newCatalogCache(time.Minute, time.Second)
		c.sold("p")
		gen, readAt := c.generation(), time.Now()
		c.put("p", products.Product{ProductID: "p", Version: 1}, b, readAt, gen)
		if e, ok := c.get("p"); !ok || !c.fresh(e) {
			t.Error("a read begun after the sale is not kept")
		}
	})
}
