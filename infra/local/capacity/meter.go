package capacity

import (
	"context"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/shopstream/shopstream/shared/tables"
)

// DB is the part of the DynamoDB client a Meter measures and passes calls to.
type DB interface {
	GetItem(context.Context, *dynamodb.GetItemInput, ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	PutItem(context.Context, *dynamodb.PutItemInput, ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
	UpdateItem(context.Context, *dynamodb.UpdateItemInput, ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
	DeleteItem(context.Context, *dynamodb.DeleteItemInput, ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error)
	Query(context.Context, *dynamodb.QueryInput, ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error)
	BatchGetItem(context.Context, *dynamodb.BatchGetItemInput, ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error)
	TransactWriteItems(context.Context, *dynamodb.TransactWriteItemsInput, ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error)
	TransactGetItems(context.Context, *dynamodb.TransactGetItemsInput, ...func(*dynamodb.Options)) (*dynamodb.TransactGetItemsOutput, error)
}

// Call is one call a Meter passed on and what it cost.
type Call struct {
	// Op is the DynamoDB operation, e.g. "TransactWriteItems".
	Op string
	// Failed: the call returned an error; it is counted, not charged.
	Failed bool
	// Read and Write are the units by AWS's rules, tables and indexes;
	// IndexWrite is the part of Write the secondary indexes take.
	Read, Write, IndexWrite float64
	// ReportedRead and ReportedWrite are the units the server reported
	// (ReturnConsumedCapacity TOTAL).
	ReportedRead, ReportedWrite float64
}

// Transactional reports whether the call is a transaction.
func (c Call) Transactional() bool { return c.Op == "TransactWriteItems" }

// Sum adds calls up (Op and Failed stay empty).
func Sum(calls []Call) Call {
	var s Call
	for _, c := range calls {
		s.Read += c.Read
		s.Write += c.Write
		s.IndexWrite += c.IndexWrite
		s.ReportedRead += c.ReportedRead
		s.ReportedWrite += c.ReportedWrite
	}
	return s
}

// Meter is a DB that passes every call on and charges it by AWS's rules. To
// size a write it knows the item before and after it: from the write itself
// (a put), from an earlier call, or from a strongly consistent GetItem of
// its own, which it does not charge. It therefore assumes that, while it
// measures, the items it writes change only through it.
type Meter struct {
	db     DB
	tables map[string]tables.Table // by physical name

	mu     sync.Mutex
	images map[string]map[string]types.AttributeValue // by itemID; nil: absent
	calls  []Call
}

// NewMeter returns a Meter on db for the tables of shared/tables under the
// name prefix.
func NewMeter(db DB, prefix string) *Meter {
	m := &Meter{db: db, tables: map[string]tables.Table{}, images: map[string]map[string]types.AttributeValue{}}
	for _, t := range tables.All() {
		m.tables[tables.Physical(prefix, t.Name)] = t
	}
	return m
}

// Calls returns the calls so far, in the order they ended.
func (m *Meter) Calls() []Call {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]Call(nil), m.calls...)
}

func (m *Meter) record(c Call) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.calls = append(m.calls, c)
}

func (m *Meter) table(name *string) (tables.Table, error) {
	t, ok := m.tables[aws.ToString(name)]
	if !ok {
		return tables.Table{}, fmt.Errorf("table %s: not a shopstream table under the meter's prefix", aws.ToString(name))
	}
	return t, nil
}

// itemID names an item by its table and key attributes.
func itemID(table string, t tables.Table, item map[string]types.AttributeValue) string {
	var b strings.Builder
	b.WriteString(table)
	for _, k := range []*tables.Key{&t.PartitionKey, t.SortKey} {
		if k == nil {
			continue
		}
		fmt.Fprintf(&b, "\x00%s=", k.Name)
		switch v := item[k.Name].(type) {
		case *types.AttributeValueMemberS:
			b.WriteString("S:" + v.Value)
		case *types.AttributeValueMemberN:
			b.WriteString("N:" + v.Value)
		case *types.AttributeValueMemberB:
			fmt.Fprintf(&b, "B:%x", v.Value)
		}
	}
	return b.String()
}

// keyOf is the key attributes of an item.
func keyOf(t tables.Table, item map[string]types.AttributeValue) map[string]types.AttributeValue {
	key := map[string]types.AttributeValue{t.PartitionKey.Name: item[t.PartitionKey.Name]}
	if t.SortKey != nil {
		key[t.SortKey.Name] = item[t.SortKey.Name]
	}
	return key
}

func (m *Meter) remember(table string, t tables.Table, key, item map[string]types.AttributeValue) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.images[itemID(table, t, key)] = item
}

// image returns the item under key as the meter last saw it, or reads it.
func (m *Meter) image(ctx context.Context, table *string, t tables.Table, key map[string]types.AttributeValue) (map[string]types.AttributeValue, error) {
	id := itemID(aws.ToString(table), t, key)
	m.mu.Lock()
	item, ok := m.images[id]
	m.mu.Unlock()
	if ok {
		return item, nil
	}
	return m.read(ctx, table, t, key)
}

// read reads the item under key, strongly consistent, and remembers it.
func (m *Meter) read(ctx context.Context, table *string, t tables.Table, key map[string]types.AttributeValue) (map[string]types.AttributeValue, error) {
	out, err := m.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: table, Key: key, ConsistentRead: aws.Bool(true)})
	if err != nil {
		return nil, fmt.Errorf("meter: read %s item: %w", aws.ToString(table), err)
	}
	m.remember(aws.ToString(table), t, key, out.Item)
	return out.Item, nil
}

// ref is an item a transaction names.
type ref struct {
	table *string
	def   tables.Table
	key   map[string]types.AttributeValue
}

// readAll reads the items, strongly consistent, in as few BatchGetItem calls
// as it takes, remembers them and returns them in order (nil: absent).
func (m *Meter) readAll(ctx context.Context, refs []ref) ([]map[string]types.AttributeValue, error) {
	out := make([]map[string]types.AttributeValue, len(refs))
	byID := map[string]int{}
	for start := 0; start < len(refs); start += 100 {
		req := map[string]types.KeysAndAttributes{}
		for i, r := range refs[start:min(start+100, len(refs))] {
			name := aws.ToString(r.table)
			byID[itemID(name, r.def, r.key)] = start + i
			ka := req[name]
			ka.Keys, ka.ConsistentRead = append(ka.Keys, r.key), aws.Bool(true)
			req[name] = ka
		}
		for len(req) > 0 {
			res, err := m.db.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{RequestItems: req})
			if err != nil {
				return nil, fmt.Errorf("meter: read items: %w", err)
			}
			for name, items := range res.Responses {
				for _, item := range items {
					if i, ok := byID[itemID(name, m.tables[name], item)]; ok {
						out[i] = item
					}
				}
			}
			req = res.UnprocessedKeys
		}
	}
	for i, r := range refs {
		m.remember(aws.ToString(r.table), r.def, r.key, out[i])
	}
	return out, nil
}

// imagesOf returns the items as the meter last saw them, reading the others.
func (m *Meter) imagesOf(ctx context.Context, refs []ref) ([]map[string]types.AttributeValue, error) {
	out := make([]map[string]types.AttributeValue, len(refs))
	var missing []ref
	var at []int
	m.mu.Lock()
	for i, r := range refs {
		item, ok := m.images[itemID(aws.ToString(r.table), r.def, r.key)]
		if ok {
			out[i] = item
			continue
		}
		missing, at = append(missing, r), append(at, i)
	}
	m.mu.Unlock()
	if len(missing) == 0 {
		return out, nil
	}
	got, err := m.readAll(ctx, missing)
	if err != nil {
		return nil, err
	}
	for j, i := range at {
		out[i] = got[j]
	}
	return out, nil
}

func reported(ccs ...*types.ConsumedCapacity) float64 {
	u := 0.0
	for _, cc := range ccs {
		if cc != nil {
			u += aws.ToFloat64(cc.CapacityUnits)
		}
	}
	return u
}

func consistency(strong *bool) Consistency {
	if aws.ToBool(strong) {
		return Strong
	}
	return Eventual
}

// GetItem charges the item read.
func (m *Meter) GetItem(ctx context.Context, in *dynamodb.GetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	t, err := m.table(in.TableName)
	if err != nil {
		return nil, err
	}
	in.ReturnConsumedCapacity = types.ReturnConsumedCapacityTotal
	out, err := m.db.GetItem(ctx, in, opts...)
	if err != nil {
		m.record(Call{Op: "GetItem", Failed: true})
		return out, err
	}
	item := out.Item
	if in.ProjectionExpression != nil {
		// A projection does not change what is read.
		if item, err = m.read(ctx, in.TableName, t, in.Key); err != nil {
			return nil, err
		}
	} else if aws.ToBool(in.ConsistentRead) {
		m.remember(aws.ToString(in.TableName), t, in.Key, item)
	}
	m.record(Call{Op: "GetItem", Read: ReadUnits(ItemSize(item), consistency(in.ConsistentRead)), ReportedRead: reported(out.ConsumedCapacity)})
	return out, nil
}

// PutItem charges the larger of the item replaced and the item put.
func (m *Meter) PutItem(ctx context.Context, in *dynamodb.PutItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	t, err := m.table(in.TableName)
	if err != nil {
		return nil, err
	}
	before, err := m.image(ctx, in.TableName, t, keyOf(t, in.Item))
	if err != nil {
		return nil, err
	}
	in.ReturnConsumedCapacity = types.ReturnConsumedCapacityTotal
	out, err := m.db.PutItem(ctx, in, opts...)
	if err != nil {
		m.record(Call{Op: "PutItem", Failed: true})
		return out, err
	}
	m.remember(aws.ToString(in.TableName), t, in.Item, in.Item)
	w := WriteOf(t, before, in.Item, false)
	m.record(Call{Op: "PutItem", Write: w.Total(), IndexWrite: w.Indexes, ReportedWrite: reported(out.ConsumedCapacity)})
	return out, nil
}

// UpdateItem charges the larger of the item before and after the update.
func (m *Meter) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	t, err := m.table(in.TableName)
	if err != nil {
		return nil, err
	}
	before, err := m.image(ctx, in.TableName, t, in.Key)
	if err != nil {
		return nil, err
	}
	in.ReturnConsumedCapacity = types.ReturnConsumedCapacityTotal
	out, err := m.db.UpdateItem(ctx, in, opts...)
	if err != nil {
		m.record(Call{Op: "UpdateItem", Failed: true})
		return out, err
	}
	after := out.Attributes
	if in.ReturnValues != types.ReturnValueAllNew {
		if after, err = m.read(ctx, in.TableName, t, in.Key); err != nil {
			return nil, err
		}
	} else {
		m.remember(aws.ToString(in.TableName), t, in.Key, after)
	}
	w := WriteOf(t, before, after, false)
	m.record(Call{Op: "UpdateItem", Write: w.Total(), IndexWrite: w.Indexes, ReportedWrite: reported(out.ConsumedCapacity)})
	return out, nil
}

// DeleteItem charges the item deleted.
func (m *Meter) DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error) {
	t, err := m.table(in.TableName)
	if err != nil {
		return nil, err
	}
	before, err := m.image(ctx, in.TableName, t, in.Key)
	if err != nil {
		return nil, err
	}
	in.ReturnConsumedCapacity = types.ReturnConsumedCapacityTotal
	out, err := m.db.DeleteItem(ctx, in, opts...)
	if err != nil {
		m.record(Call{Op: "DeleteItem", Failed: true})
		return out, err
	}
	m.remember(aws.ToString(in.TableName), t, in.Key, nil)
	w := WriteOf(t, before, nil, false)
	m.record(Call{Op: "DeleteItem", Write: w.Total(), IndexWrite: w.Indexes, ReportedWrite: reported(out.ConsumedCapacity)})
	return out, nil
}

var placeholder = regexp.MustCompile(`[#:][A-Za-z0-9_]+`)

// Query charges the items the query read, summed before rounding: with a
// filter or a projection those are not the items returned, so the meter
// reads them again without either (uncharged).
func (m *Meter) Query(ctx context.Context, in *dynamodb.QueryInput, opts ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	if _, err := m.table(in.TableName); err != nil {
		return nil, err
	}
	in.ReturnConsumedCapacity = types.ReturnConsumedCapacityTotal
	out, err := m.db.Query(ctx, in, opts...)
	if err != nil {
		m.record(Call{Op: "Query", Failed: true})
		return out, err
	}
	read := out.Items
	if in.FilterExpression != nil || in.ProjectionExpression != nil || (in.Select != "" && in.Select != types.SelectAllAttributes) {
		again := *in
		again.FilterExpression, again.ProjectionExpression, again.Select = nil, nil, ""
		again.ReturnConsumedCapacity = types.ReturnConsumedCapacityNone
		used := map[string]bool{}
		for _, p := range placeholder.FindAllString(aws.ToString(in.KeyConditionExpression), -1) {
			used[p] = true
		}
		again.ExpressionAttributeNames, again.ExpressionAttributeValues = nil, nil
		for p, n := range in.ExpressionAttributeNames {
			if used[p] {
				if again.ExpressionAttributeNames == nil {
					again.ExpressionAttributeNames = map[string]string{}
				}
				again.ExpressionAttributeNames[p] = n
			}
		}
		for p, v := range in.ExpressionAttributeValues {
			if used[p] {
				if again.ExpressionAttributeValues == nil {
					again.ExpressionAttributeValues = map[string]types.AttributeValue{}
				}
				again.ExpressionAttributeValues[p] = v
			}
		}
		all, err := m.db.Query(ctx, &again)
		if err != nil {
			return nil, fmt.Errorf("meter: query %s again without filter: %w", aws.ToString(in.TableName), err)
		}
		if int32(len(all.Items)) != out.ScannedCount {
			return nil, fmt.Errorf("meter: query %s again without filter read %d items, the query %d", aws.ToString(in.TableName), len(all.Items), out.ScannedCount)
		}
		read = all.Items
	}
	size := 0
	for _, item := range read {
		size += ItemSize(item)
	}
	m.record(Call{Op: "Query", Read: ReadUnits(size, consistency(in.ConsistentRead)), ReportedRead: reported(out.ConsumedCapacity)})
	return out, nil
}

// BatchGetItem charges each key it processed as one GetItem.
func (m *Meter) BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error) {
	in.ReturnConsumedCapacity = types.ReturnConsumedCapacityTotal
	out, err := m.db.BatchGetItem(ctx, in, opts...)
	if err != nil {
		m.record(Call{Op: "BatchGetItem", Failed: true})
		return out, err
	}
	read := 0.0
	names := make([]string, 0, len(in.RequestItems))
	for name := range in.RequestItems {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		req := in.RequestItems[name]
		t, err := m.table(&name)
		if err != nil {
			return nil, err
		}
		got := map[string]map[string]types.AttributeValue{}
		for _, item := range out.Responses[name] {
			got[itemID(name, t, item)] = item
		}
		unprocessed := map[string]bool{}
		for _, key := range out.UnprocessedKeys[name].Keys {
			unprocessed[itemID(name, t, key)] = true
		}
		for _, key := range req.Keys {
			id := itemID(name, t, key)
			if unprocessed[id] {
				continue
			}
			item := got[id]
			if req.ProjectionExpression != nil && item != nil {
				if item, err = m.read(ctx, &name, t, key); err != nil {
					return nil, err
				}
			}
			read += ReadUnits(ItemSize(item), consistency(req.ConsistentRead))
		}
	}
	m.record(Call{Op: "BatchGetItem", Read: read, ReportedRead: reported(ptrs(out.ConsumedCapacity)...)})
	return out, nil
}

func ptrs(ccs []types.ConsumedCapacity) []*types.ConsumedCapacity {
	out := make([]*types.ConsumedCapacity, len(ccs))
	for i := range ccs {
		out[i] = &ccs[i]
	}
	return out
}

// TransactWriteItems charges every action as a transactional write of its
// item (a ConditionCheck by CheckUnits), and the index writes as standard.
// TransactGetItems costs each item read twice a strongly consistent read
// ("Capacity management for transactions": two reads per item, one to
// prepare and one to commit).
func (m *Meter) TransactGetItems(ctx context.Context, in *dynamodb.TransactGetItemsInput, opts ...func(*dynamodb.Options)) (*dynamodb.TransactGetItemsOutput, error) {
	in.ReturnConsumedCapacity = types.ReturnConsumedCapacityTotal
	out, err := m.db.TransactGetItems(ctx, in, opts...)
	if err != nil {
		m.record(Call{Op: "TransactGetItems", Failed: true})
		return out, err
	}
	read := 0.0
	for i, r := range out.Responses {
		item := r.Item
		if g := in.TransactItems[i].Get; g != nil && g.ProjectionExpression != nil && item != nil {
			t, err := m.table(g.TableName)
			if err != nil {
				return nil, err
			}
			if item, err = m.read(ctx, g.TableName, t, g.Key); err != nil {
				return nil, err
			}
		}
		read += ReadUnits(ItemSize(item), Transactional)
	}
	m.record(Call{Op: "TransactGetItems", Read: read, ReportedRead: reported(ptrs(out.ConsumedCapacity)...)})
	return out, nil
}

func (m *Meter) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, opts ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	type action struct {
		table         *string
		def           tables.Table
		key, put      map[string]types.AttributeValue
		update, check bool
	}
	actions := make([]action, len(in.TransactItems))
	refs := make([]ref, len(in.TransactItems))
	for i, a := range in.TransactItems {
		var x action
		switch {
		case a.Put != nil:
			x = action{table: a.Put.TableName, key: a.Put.Item, put: a.Put.Item}
			if t, ok := m.tables[aws.ToString(x.table)]; ok {
				x.key = keyOf(t, a.Put.Item)
			}
		case a.Update != nil:
			x = action{table: a.Update.TableName, key: a.Update.Key, update: true}
		case a.Delete != nil:
			x = action{table: a.Delete.TableName, key: a.Delete.Key}
		case a.ConditionCheck != nil:
			x = action{table: a.ConditionCheck.TableName, key: a.ConditionCheck.Key, check: true}
		default:
			return nil, fmt.Errorf("meter: transaction action %d: none of Put, Update, Delete, ConditionCheck", i)
		}
		var err error
		if x.def, err = m.table(x.table); err != nil {
			return nil, err
		}
		actions[i], refs[i] = x, ref{x.table, x.def, x.key}
	}
	befores, err := m.imagesOf(ctx, refs)
	if err != nil {
		return nil, err
	}
	in.ReturnConsumedCapacity = types.ReturnConsumedCapacityTotal
	out, err := m.db.TransactWriteItems(ctx, in, opts...)
	if err != nil {
		m.record(Call{Op: "TransactWriteItems", Failed: true})
		return out, err
	}
	var updated []ref
	var at []int
	afters := make([]map[string]types.AttributeValue, len(actions))
	for i, x := range actions {
		switch {
		case x.update:
			updated, at = append(updated, refs[i]), append(at, i)
		case !x.check:
			afters[i] = x.put
			m.remember(aws.ToString(x.table), x.def, x.key, x.put)
		}
	}
	if len(updated) > 0 {
		got, err := m.readAll(ctx, updated)
		if err != nil {
			return nil, err
		}
		for j, i := range at {
			afters[i] = got[j]
		}
	}
	c := Call{Op: "TransactWriteItems", ReportedWrite: reported(ptrs(out.ConsumedCapacity)...)}
	for i, x := range actions {
		if x.check {
			c.Write += CheckUnits(befores[i])
			continue
		}
		w := WriteOf(x.def, befores[i], afters[i], true)
		c.Write += w.Total()
		c.IndexWrite += w.Indexes
	}
	m.record(c)
	return out, nil
}
