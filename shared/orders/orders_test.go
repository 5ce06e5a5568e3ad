package orders_test

import (
	"testing"

	"github.com/shopstream/shopstream/shared/errcode"
	"github.com/shopstream/shopstream/shared/orders"
)

// TestValidateIDs: only ids no product can have (not a ULID) are named,
// each by its item's index; Validate leaves them to ValidateIDs.
func TestValidateIDs(t *testing.T) {
	const id = "01HZZZZZZZZZZZZZZZZZZZZZZZ"
	for _, tc := range []struct {
		name  string
		items []orders.Item
		want  []string // the fields named
	}{
		{"ulids", []orders.Item{{ProductID: id, Quantity: 1}}, nil},
		{"a word", []orders.Item{{ProductID: id, Quantity: 1}, {ProductID: "nope", Quantity: 1}}, []string{"items[1].productId"}},
		{"lower case", []orders.Item{{ProductID: "01hzzzzzzzzzzzzzzzzzzzzzzz", Quantity: 1}}, []string{"items[0].productId"}},
		{"one too long", []orders.Item{{ProductID: id + "0", Quantity: 1}}, []string{"items[0].productId"}},
		{"past the ULID range", []orders.Item{{ProductID: "8" + id[1:], Quantity: 1}}, []string{"items[0].productId"}},
		{"a control character", []orders.Item{{ProductID: id[:25] + "\x00", Quantity: 1}}, []string{"items[0].productId"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := orders.Request{Items: tc.items}
			if err := r.Validate(); err != nil {
				t.Fatalf("Validate: %v, want ids left to ValidateIDs", err)
			}
			err := r.ValidateIDs()
			if tc.want == nil {
				if err != nil {
					t.Fatalf("got %v, want none", err)
				}
				return
			}
			e := errcode.As(err)
			if e == nil || e.Code != errcode.Invalid || len(e.Fields) != len(tc.want) {
				t.Fatalf("got %v, want Invalid naming %v", err, tc.want)
			}
			for i, f := range e.Fields {
				if f.Field != tc.want[i] {
					t.Errorf("field %d: got %s, want %s", i, f.Field, tc.want[i])
				}
			}
		})
	}
}
