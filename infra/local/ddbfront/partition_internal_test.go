package ddbfront

import (
	"fmt"
	"testing"
	"time"
)

// TestKeyValuesShareTheirPartition: the partition key values that hash to
// one partition of a table share its units, as on AWS before DynamoDB
// splits a partition; values of another partition, or of another table,
// do not; and the values spread over every partition.
func TestKeyValuesShareTheirPartition(t *testing.T) {
	now := time.Now()
	l := newLimiter(Limits{PartitionWCU: 10, Partitions: 4, Now: func() time.Time { return now }}, nil)
	w := func(table, pk string) bucketKey { return bucketKey{table: table, pk: pk, write: true} }
	hot := w("stock", "p#0")
	var same, other bucketKey
	counts := map[string]int{}
	for i := range 1000 {
		k := w("stock", fmt.Sprintf("p#%d", i+1))
		part := l.partition(k).pk
		counts[part]++
		switch {
		case part == l.partition(hot).pk && same.pk == "":
			same = k
		case part != l.partition(hot).pk && other.pk == "":
			other = k
		}
	}
	if len(counts) != 4 {
		t.Fatalf("partitions used by 1,000 values: got %d, want 4", len(counts))
	}
	for part, n := range counts {
		if n < 200 || n > 300 {
			t.Errorf("partition %q: %d of 1,000 values, want 200..300 (a well-mixed hash)", part, n)
		}
	}
	if _, _, ok := l.take([]charge{{bucket: hot, units: 10}}); !ok {
		t.Fatal("a full partition refused its first 10 units")
	}
	if _, _, ok := l.take([]charge{{bucket: same, units: 1}}); ok {
		t.Errorf("value %q of the hot value's partition: admitted, want throttled", same.pk)
	}
	if _, _, ok := l.take([]charge{{bucket: other, units: 1}}); !ok {
		t.Errorf("value %q of another partition: throttled, want admitted", other.pk)
	}
	if _, _, ok := l.take([]charge{{bucket: w("orders", hot.pk), units: 1}}); !ok {
		t.Errorf("the same value in another table: throttled, want admitted")
	}
	// Two values of one partition in one request pay together.
	now = now.Add(time.Second)
	if _, _, ok := l.take([]charge{{bucket: hot, units: 1}}); !ok {
		t.Fatal("a refilled partition refused 1 unit")
	}
	if _, _, ok := l.take([]charge{{bucket: hot, units: 5}, {pos: 1, bucket: same, units: 5}}); ok {
		t.Errorf("10 units on a partition holding 9, in one request: admitted, want throttled")
	}
}

// TestReadsAndWritesShareTheirPartition: a partition serves PartitionRCU
// read units or PartitionWCU write units a second, or a linear mix of the
// two: reads spend what writes leave, at WCU/RCU write units a read unit.
func TestReadsAndWritesShareTheirPartition(t *testing.T) {
	now := time.Now()
	l := newLimiter(Limits{PartitionWCU: 10, PartitionRCU: 30, Partitions: 1, Now: func() time.Time { return now }}, nil)
	write := bucketKey{table: "t", pk: "a", write: true}
	read := bucketKey{table: "t", pk: "b"} // another value of the one partition
	if _, _, ok := l.take([]charge{{bucket: write, units: 9}}); !ok {
		t.Fatal("9 write units of a full partition of 10: refused")
	}
	if _, _, ok := l.take([]charge{{bucket: read, units: 6}}); ok {
		t.Errorf("6 read units (2 write units' worth) with 1 write unit left: admitted, want throttled")
	}
	if _, _, ok := l.take([]charge{{bucket: read, units: 3}}); !ok {
		t.Errorf("3 read units (1 write unit's worth) with 1 write unit left: throttled, want admitted")
	}
	if _, _, ok := l.take([]charge{{bucket: write, units: 1}}); ok {
		t.Errorf("a write unit once reads took the last: admitted, want throttled")
	}
}
