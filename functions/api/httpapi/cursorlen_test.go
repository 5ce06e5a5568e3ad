package httpapi_test

import (
	"strings"
	"testing"

	"github.com/shopstream/shopstream/functions/api/store"
	"github.com/shopstream/shopstream/shared/cursor"
	"github.com/shopstream/shopstream/shared/orders"
	"github.com/shopstream/shopstream/shared/tables"
	"github.com/shopstream/shopstream/shared/users"
)

// TestLongestOpenOrdersCursorIsAccepted: the open-orders list keeps a
// position in each of its shards, each naming an order's user. With user ids
// of the longest kind (MaxIDLen bytes of the characters JSON escapes the
// most), the cursor of such a page must still be one Decode accepts.
func TestLongestOpenOrdersCursorIsAccepted(t *testing.T) {
	widest := map[string]string{
		"quote":      strings.Repeat(`"`, users.MaxIDLen),
		"html":       strings.Repeat("<", users.MaxIDLen),
		"separators": strings.Repeat("\u2028", users.MaxIDLen/3),
		"backslash":  strings.Repeat(`\`, users.MaxIDLen),
	}
	s := cursor.NewSigner([]byte(testSecret))
	binding := "GET /orders\nstatus=SHIPPED"
	for name, user := range widest {
		t.Run(name, func(t *testing.T) {
			if !users.ValidID(user) {
				t.Fatalf("%q is not a valid user id", user)
			}
			pos := store.Position{}
			for i := range tables.OpenOrderShards {
				pos.Shards = append(pos.Shards, store.ShardPosition{After: map[string]string{
					"openShard": orders.OpenKey(orders.Shipped, i), "orderId": "01ARZ3NDEKTSV4RRFFQ69G5FAV", "userId": user,
				}})
			}
			c, err := s.Encode(binding, pos)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%d characters", len(c))
			var back store.Position
			if err := s.Decode(binding, c, &back); err != nil {
				t.Fatalf("a cursor of %d characters (MaxLen %d) is refused: %v", len(c), cursor.MaxLen, err)
			}
			if back.Shards[7].After["userId"] != user {
				t.Fatalf("user id read back as %q", back.Shards[7].After["userId"])
			}
		})
	}
}
