package stack

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/aws/aws-cdk-go/awscdk/v2/awsdynamodb"
	"github.com/aws/jsii-runtime-go"

	"github.com/shopstream/shopstream/shared/tables"
)

// Throughput is a rate of DynamoDB request units a second, reads and writes;
// 0 leaves that direction unset.
type Throughput struct {
	Reads, Writes int
}

// TableQuota is DynamoDB's default quota of on-demand request units a
// second, reads and writes each, of one table or one global index. A
// table's maximum throughput must stay below it, and its warm throughput
// can be raised up to it.
const TableQuota = 40000

// NewTableWarm is the warm throughput a new on-demand table or global
// index starts with ("Understanding DynamoDB warm throughput in different
// scenarios"). Warm throughput is never lowered, so a sale asks for more.
var NewTableWarm = Throughput{Reads: 12000, Writes: 4000}

// warmFloor is NewTableWarm's units in direction dir.
func warmFloor(dir string) int {
	if dir == Reads {
		return NewTableWarm.Reads
	}
	return NewTableWarm.Writes
}

// warmRange says what units a sale's warm throughput takes in direction dir.
func warmRange(dir string) string {
	return fmt.Sprintf("a whole number from %d (what a new on-demand table or index serves at once: warm throughput is never lowered) to %d (DynamoDB's default per-table quota)", warmFloor(dir), TableQuota)
}

// SaleWarmContext is the context setting that pre-warms tables for a sale
// (-c saleWarmThroughput=product-stock.writes=8000,…; make deploy's
// SALE_WARM_THROUGHPUT).
const SaleWarmContext = "saleWarmThroughput"

// Directions of a saleWarmThroughput pair.
const (
	Reads  = "reads"
	Writes = "writes"
)

// ParseSaleWarmThroughput reads the saleWarmThroughput context setting:
// comma-separated target.direction=units pairs, where target is a table of
// shared/tables or one of its global indexes written table.index, direction
// is reads or writes, and units a whole number from NewTableWarm's to
// TableQuota
// ("product-stock.writes=8000,product-stock.reads=24000,orders.openByStatus.writes=6000").
// The map is keyed by target.
func ParseSaleWarmThroughput(s string) (map[string]Throughput, error) {
	out := map[string]Throughput{}
	seen := map[string]bool{}
	for _, pair := range strings.Split(s, ",") {
		key, value, ok := strings.Cut(strings.TrimSpace(pair), "=")
		if !ok {
			return nil, fmt.Errorf("%s %q: want target.reads=units or target.writes=units pairs, got %q", SaleWarmContext, s, pair)
		}
		i := strings.LastIndex(key, ".")
		if i < 0 {
			return nil, fmt.Errorf("%s %q: %q names no direction, want %s.reads or %s.writes", SaleWarmContext, s, key, key, key)
		}
		target, dir := key[:i], key[i+1:]
		if dir != Reads && dir != Writes {
			return nil, fmt.Errorf("%s %q: direction %q of %s, want %s or %s", SaleWarmContext, s, dir, target, Reads, Writes)
		}
		if err := checkTarget(target); err != nil {
			return nil, fmt.Errorf("%s %q: %w", SaleWarmContext, s, err)
		}
		if seen[key] {
			return nil, fmt.Errorf("%s %q: %s given twice", SaleWarmContext, s, key)
		}
		seen[key] = true
		n, err := strconv.Atoi(value)
		if err != nil || n < warmFloor(dir) || n > TableQuota {
			return nil, fmt.Errorf("%s %q: units of %s must be %s, got %q", SaleWarmContext, s, key, warmRange(dir), value)
		}
		w := out[target]
		if dir == Reads {
			w.Reads = n
		} else {
			w.Writes = n
		}
		out[target] = w
	}
	return out, nil
}

// checkTarget returns an error unless target is a table of shared/tables or
// table.index for one of its global indexes (a local index shares its
// table's throughput and has none of its own).
func checkTarget(target string) error {
	table, index, isIndex := strings.Cut(target, ".")
	var names []string
	for _, t := range tables.All() {
		names = append(names, t.Name)
		if t.Name != table {
			continue
		}
		if !isIndex {
			return nil
		}
		var global []string
		for _, ix := range t.GlobalIndexes {
			global = append(global, ix.Name)
		}
		if !slices.Contains(global, index) {
			return fmt.Errorf("%s has no global index %q, want one of %v", table, index, global)
		}
		return nil
	}
	return fmt.Errorf("unknown table %q, want one of %v", table, names)
}

// validateThroughput checks the capacity settings of a stage: the recovery
// period, the maximum throughput and the sale's warm throughput.
func (c Config) validateThroughput() error {
	if c.PITRRecoveryDays < 1 || c.PITRRecoveryDays > 35 {
		return fmt.Errorf("stage %s: point-in-time recovery period %d days, want 1 to 35", c.Stage, c.PITRRecoveryDays)
	}
	for dir, n := range map[string]int{Reads: c.MaxThroughput.Reads, Writes: c.MaxThroughput.Writes} {
		if n < 0 || n >= TableQuota {
			return fmt.Errorf("stage %s: maximum %s %d a second, want 0 (none) or 1 to %d (below DynamoDB's default per-table quota)", c.Stage, dir, n, TableQuota-1)
		}
	}
	for target, w := range c.SaleWarmThroughput {
		if err := checkTarget(target); err != nil {
			return fmt.Errorf("stage %s: warm throughput: %w", c.Stage, err)
		}
		for dir, n := range map[string]int{Reads: w.Reads, Writes: w.Writes} {
			if n != 0 && (n < warmFloor(dir) || n > TableQuota) {
				return fmt.Errorf("stage %s: warm %s of %s %d a second, want 0 (none) or %s", c.Stage, dir, target, n, warmRange(dir))
			}
		}
	}
	return nil
}

// MaxThroughputOf is the maximum on-demand throughput of a table or of
// table.index: the stage's cap, lifted to the sale's warm throughput where
// that is higher (a table warmed for a sale may serve what it was warmed
// for). A cap that reaches TableQuota is none: AWS wants a maximum below
// the quota, and the quota bounds the table the same.
func (c Config) MaxThroughputOf(target string) Throughput {
	warm := c.SaleWarmThroughput[target]
	lift := func(limit, warm int) int {
		if limit == 0 {
			return 0
		}
		limit = max(limit, warm)
		if limit >= TableQuota {
			return 0
		}
		return limit
	}
	return Throughput{Reads: lift(c.MaxThroughput.Reads, warm.Reads), Writes: lift(c.MaxThroughput.Writes, warm.Writes)}
}

// units is n as a CDK number, nil for 0 (unset).
func units(n int) *float64 {
	if n == 0 {
		return nil
	}
	return jsii.Number(n)
}

// warmThroughput is the WarmThroughput property of a target, nil when the
// sale asks nothing of it: warm throughput can only be raised, so it is
// declared only for a sale.
func (c Config) warmThroughput(target string) *awsdynamodb.WarmThroughput {
	w, ok := c.SaleWarmThroughput[target]
	if !ok || w == (Throughput{}) {
		return nil
	}
	return &awsdynamodb.WarmThroughput{ReadUnitsPerSecond: units(w.Reads), WriteUnitsPerSecond: units(w.Writes)}
}

// IndexTarget names a global index in the saleWarmThroughput setting and in
// MaxThroughputOf: table.index.
func IndexTarget(table, index string) string { return table + "." + index }
