package stock

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// A Hold is an order's units taken from a bucket before the order is
// written: a sale decrements its bucket with a single-item conditional
// write, outside the order's transaction, and records the hold in the
// bucket's set of holds in the same write; the order's transaction follows,
// and the hold is removed once the order is written, or the units given
// back (with the hold removed, in one conditional write) when it is not.
// A hold left behind by a process that stopped between the two writes is
// settled from the order table once it is older than StaleAfter: the order
// exists, the hold is removed; it does not, the units return.
//
// The hold makes each of those writes happen once whatever is retried: the
// decrement is conditional on the hold being absent, the give-back and the
// settling on it being present.
type Hold struct {
	At      time.Time // when the units were taken
	Units   int64
	OrderID string
	UserID  string
}

// StaleAfter is the age after which a hold is settled by whoever finds it.
// An order is written within OrderWindow of its hold or not at all, and
// every call of a request ends at its deadline, so a hold this old has an
// order or will never have one.
const StaleAfter = 5 * time.Minute

// OrderWindow is how long after its hold an order may still be written.
const OrderWindow = time.Minute

// String is the hold as the bucket's set keeps it: the time in
// milliseconds, the units, the order and the user, space-separated (the
// user last: its id may hold anything but a leading space).
func (h Hold) String() string {
	return strconv.FormatInt(h.At.UnixMilli(), 10) + " " + strconv.FormatInt(h.Units, 10) + " " + h.OrderID + " " + h.UserID
}

// ParseHold reads a hold as String writes it.
func ParseHold(s string) (Hold, error) {
	parts := strings.SplitN(s, " ", 4)
	if len(parts) != 4 || parts[2] == "" || parts[3] == "" {
		return Hold{}, fmt.Errorf("hold %q: want \"<ms> <units> <order> <user>\"", s)
	}
	ms, err := strconv.ParseInt(parts[0], 10, 64)
	if err != nil {
		return Hold{}, fmt.Errorf("hold %q: time: %w", s, err)
	}
	units, err := strconv.ParseInt(parts[1], 10, 64)
	if err != nil || units <= 0 {
		return Hold{}, fmt.Errorf("hold %q: units must be a positive integer", s)
	}
	return Hold{At: time.UnixMilli(ms).UTC(), Units: units, OrderID: parts[2], UserID: parts[3]}, nil
}

// Stale reports whether the hold is old enough to settle at now.
func (h Hold) Stale(now time.Time) bool { return now.Sub(h.At) >= StaleAfter }

// Held is the units of the holds in set whose order may still be written
// or given back at now (held less than OrderWindow): units that may come
// back within moments. An older hold's order is written or was stopped; a
// stopped one's units come back only once the hold is settled, stale.
// Entries that do not parse count nothing.
func Held(set []string, now time.Time) int64 {
	var n int64
	for _, s := range set {
		if h, err := ParseHold(s); err == nil && now.Sub(h.At) < OrderWindow {
			n += h.Units
		}
	}
	return n
}
