package counting

import (
	"fmt"

	"github.com/shopstream/shopstream/shared/tables"
)

// TablesFromEnv reads the physical table names from each table's environment
// variable (shared/tables).
func TablesFromEnv(getenv func(string) string) (Tables, error) {
	var t Tables
	for logical, dest := range map[string]*string{
		tables.Orders: &t.Orders, tables.Reviews: &t.Reviews, tables.Users: &t.Users,
		tables.Products: &t.Products, tables.CounterEvents: &t.CounterEvents,
	} {
		def, err := tables.ByName(logical)
		if err != nil {
			return t, err
		}
		if *dest = getenv(def.EnvVar); *dest == "" {
			return t, fmt.Errorf("%s is not set", def.EnvVar)
		}
	}
	return t, nil
}
