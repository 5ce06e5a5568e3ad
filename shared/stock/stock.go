// Package stock holds the rules of a product's stock split over buckets
// (write sharding, docs/data-model.md): how units are spread over the
// buckets, which buckets a sale takes its units from, and which reads of
// them count no unit twice. Pure logic; the store applies it to DynamoDB.
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

// Stamp is what a bucket says of the last write that added units to the
// product's buckets and stamped them all (a creation, a respread, a
// restock): Of, the number of buckets it wrote the product with (0:
// unknown, a bucket written before stamps had it); At, the write's own
// mark. Sales take units and leave the stamps alone.
type Stamp struct {
	Of int
	At int64
}

// Straddles says whether buckets read one by one (a BatchGetItem's items,
// each read-committed on its own), with these stamps, beside a catalog item
// that says the product has n buckets, may have been read on either side
// of a write that added units, and so may count a unit twice: [5,0] sold
// out of bucket 0 and restocked as [3,2] reads as 5 + 2. It is so
// when a bucket was written for another number of buckets, or two buckets
// carry different marks. Buckets read between the same two such writes
// saw only sales, which only take, and writes that add units without a
// stamp (a cancel's): with none of those, their total lies between two
// totals the product held. Such a read is read again as of one instant.
func Straddles(stamps []Stamp, n int) bool {
	for _, s := range stamps {
		if (s.Of != 0 && s.Of != n) || s.At != stamps[0].At {
			return true
		}
	}
	return false
}
