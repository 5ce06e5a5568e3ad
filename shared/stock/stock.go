// Package stock holds the rules of a product's stock split over buckets
// (write sharding, docs/data-model.md): how units are spread over the
// buckets, and which buckets a sale takes its units from. Pure logic; the
// store applies it to DynamoDB.
package stock

// Take is a decrement of one bucket: Units taken from bucket Bucket.
type Take struct {
	Bucket int
	Units  int64
}

// Spread splits total units over n buckets as evenly as can be, the
// remainder to the first buckets.
func Spread(total int64, n int) []int64 {
	out := make([]int64, n)
	for i := range out {
		out[i] = total / int64(n)
		if int64(i) < total%int64(n) {
			out[i]++
		}
	}
	return out
}

// Sum is the total of units.
func Sum(units []int64) int64 {
	var t int64
	for _, u := range units {
		t += u
	}
	return t
}

// Plan chooses the buckets a quantity is taken from, given their units: one
// bucket that holds it all, picked at random among those that do (start is
// the random draw, from 0 to len(units)-1), else the fullest buckets until it
// is covered, so the fewest buckets contend; nil when the buckets together
// hold less than quantity.
func Plan(units []int64, quantity int64, start int) []Take {
	if Sum(units) < quantity {
		return nil
	}
	n := len(units)
	for k := 0; k < n; k++ {
		i := (start + k) % n
		if units[i] >= quantity {
			return []Take{{Bucket: i, Units: quantity}}
		}
	}
	order := make([]int, n)
	for i := range order {
		order[i] = i
	}
	for i := 1; i < n; i++ {
		for j := i; j > 0 && units[order[j]] > units[order[j-1]]; j-- {
			order[j], order[j-1] = order[j-1], order[j]
		}
	}
	var takes []Take
	left := quantity
	for _, i := range order {
		if left == 0 {
			break
		}
		if u := min(units[i], left); u > 0 {
			takes = append(takes, Take{Bucket: i, Units: u})
			left -= u
		}
	}
	return takes
}
