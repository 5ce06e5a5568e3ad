package tables

// Names holds physical table names, one field per table: the one shape in
// which the functions, the local stack and the operator commands carry them.
// A table not given is "".
type Names struct {
	Users, UserEmails, Products, ProductStock, Reviews, Carts, Orders,
	IdempotencyKeys, CounterEvents, Migrations string
}

// field returns the field of logical table name, nil for an unknown name.
func (n *Names) field(logical string) *string {
	switch logical {
	case Users:
		return &n.Users
	case UserEmails:
		return &n.UserEmails
	case Products:
		return &n.Products
	case ProductStock:
		return &n.ProductStock
	case Reviews:
		return &n.Reviews
	case Carts:
		return &n.Carts
	case Orders:
		return &n.Orders
	case IdempotencyKeys:
		return &n.IdempotencyKeys
	case CounterEvents:
		return &n.CounterEvents
	case Migrations:
		return &n.Migrations
	}
	return nil
}

// WithPrefix returns every table's physical name under prefix (Physical).
func WithPrefix(prefix string) Names {
	var n Names
	for _, t := range All() {
		*n.field(t.Name) = Physical(prefix, t.Name)
	}
	return n
}

// Of returns the physical name of a logical table, "" when it is not given.
func (n Names) Of(logical string) string {
	if p := n.field(logical); p != nil {
		return *p
	}
	return ""
}

// Set gives logical table its physical name; it returns an error for a name
// that is not a table's.
func (n *Names) Set(logical, physical string) error {
	p := n.field(logical)
	if p == nil {
		_, err := ByName(logical)
		return err
	}
	*p = physical
	return nil
}

// Logical returns the logical name of the table n names physical, and
// whether there is one.
func (n Names) Logical(physical string) (string, bool) {
	if physical == "" {
		return "", false
	}
	for _, t := range All() {
		if n.Of(t.Name) == physical {
			return t.Name, true
		}
	}
	return "", false
}

// Map returns logical → physical for every table given.
func (n Names) Map() map[string]string {
	m := map[string]string{}
	for _, t := range All() {
		if v := n.Of(t.Name); v != "" {
			m[t.Name] = v
		}
	}
	return m
}
