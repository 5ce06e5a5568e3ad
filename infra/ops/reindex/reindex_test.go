package reindex_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/google/go-cmp/cmp"
	"github.com/opensearch-project/opensearch-go/v4"

	"github.com/shopstream/shopstream/functions/api/store"
	"github.com/shopstream/shopstream/infra/local/ddbfront"
	"github.com/shopstream/shopstream/infra/local/endpoints"
	"github.com/shopstream/shopstream/infra/local/stacktest"
	"github.com/shopstream/shopstream/infra/local/system"
	"github.com/shopstream/shopstream/infra/ops/reindex"
	"github.com/shopstream/shopstream/infra/ops/scan"
	"github.com/shopstream/shopstream/shared/orders"
	"github.com/shopstream/shopstream/shared/products"
	"github.com/shopstream/shopstream/shared/productsearch"
	"github.com/shopstream/shopstream/shared/reviews"
	"github.com/shopstream/shopstream/shared/tables"
	"github.com/shopstream/shopstream/shared/users"
)

// fixture is a whole system of the test's own: tables, the products stream
// feeding the live indexer, the search service, and a store writing as the
// API does.
type fixture struct {
	t      *testing.T
	sys    *system.System
	prefix string
	st     *store.Store
	search *opensearch.Client
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	return newFixtureWith(t, ddbfront.Limits{})
}

// newFixtureWith is newFixture with the DynamoDB front's limits given.
func newFixtureWith(t *testing.T, limits ddbfront.Limits) *fixture {
	t.Helper()
	prefix := stacktest.OwnPrefix(t)
	sys, err := system.Start(context.Background(), system.Config{
		Stack: endpoints.Config{
			DynamoDBUpstream: stacktest.Stack(t).Upstream(),
			TTLSweepInterval: -1,
			SweepTables:      func(name string) bool { return strings.HasPrefix(name, prefix) },
			Limits:           limits,
		},
		TablePrefix:  prefix,
		PollInterval: 100 * time.Millisecond,
	})
	if err != nil {
		t.Fatalf("start system: %v", err)
	}
	t.Cleanup(func() {
		if err := sys.Close(); err != nil {
			t.Errorf("close system: %v", err)
		}
	})
	search, err := opensearch.NewClient(opensearch.Config{Addresses: []string{sys.SearchURL}})
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{t: t, sys: sys, prefix: prefix, search: search,
		st: store.New(sys.DynamoDB(), store.Config{Tables: store.TablesWithPrefix(prefix)})}
}

func (f *fixture) config() reindex.Config {
	return reindex.Config{DB: f.sys.DynamoDB(), Search: f.search, Products: tables.Physical(f.prefix, tables.Products), BatchSize: 7}
}

func (f *fixture) reindex() reindex.Report {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rep, err := reindex.Run(ctx, f.config())
	if err != nil {
		f.t.Fatalf("reindex: %v", err)
	}
	if len(rep.Failed) > 0 {
		f.t.Fatalf("reindex: failed %v", rep.Failed)
	}
	return rep
}

func (f *fixture) idle() {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := f.sys.Poller.Idle(ctx); err != nil {
		f.t.Fatal(err)
	}
}

// do sends a request to the search service and returns status and body.
func (f *fixture) do(method, path string, body string) (int, []byte) {
	f.t.Helper()
	req, _ := http.NewRequest(method, path, strings.NewReader(body))
	if body != "" {
		req.Header.Set("Content-Type", "application/x-ndjson")
	}
	resp, err := f.search.Perform(req)
	if err != nil {
		f.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, raw
}

// doc returns the indexed document of id, nil when there is none.
func (f *fixture) doc(id string) *productsearch.Document {
	f.t.Helper()
	status, raw := f.do("GET", "/products/_doc/"+id, "")
	if status == 404 {
		return nil
	}
	var out struct {
		Found  bool                   `json:"found"`
		Source productsearch.Document `json:"_source"`
	}
	if status != 200 || json.Unmarshal(raw, &out) != nil {
		f.t.Fatalf("get doc %s: %d %s", id, status, raw)
	}
	if !out.Found {
		return nil
	}
	return &out.Source
}

// table returns every product as the table holds it, as documents.
func (f *fixture) table() map[string]productsearch.Document {
	f.t.Helper()
	out := map[string]productsearch.Document{}
	var mu sync.Mutex
	err := scan.Table(context.Background(), f.sys.DynamoDB(), scan.Input{Table: tables.Physical(f.prefix, tables.Products), Consistent: true},
		func(items []map[string]types.AttributeValue) error {
			mu.Lock()
			defer mu.Unlock()
			for _, it := range items {
				var p products.Product
				if err := attributevalue.UnmarshalMap(it, &p); err != nil {
					return err
				}
				out[p.ProductID] = productsearch.DocumentOf(p)
			}
			return nil
		})
	if err != nil {
		f.t.Fatal(err)
	}
	return out
}

// checkIndexMatchesTable fails unless the index holds exactly the table's
// products, each at its version and with its fields.
func (f *fixture) checkIndexMatchesTable(gone []string) {
	f.t.Helper()
	for id, want := range f.table() {
		got := f.doc(id)
		if got == nil {
			f.t.Errorf("product %s: no document", id)
			continue
		}
		if diff := cmp.Diff(want, *got); diff != "" {
			f.t.Errorf("product %s (-table +index):\n%s", id, diff)
		}
	}
	for _, id := range gone {
		if d := f.doc(id); d != nil {
			f.t.Errorf("deleted product %s: got document %+v, want none", id, d)
		}
	}
}

// catalog writes products in three categories, a user, orders and reviews
// (so counters and versions move), and waits until the indexer followed.
func (f *fixture) catalog(n int) []string {
	f.t.Helper()
	ctx := context.Background()
	if _, err := f.st.CreateUser(ctx, "u1", users.New{Email: "u1@example.com", Name: "U1"}); err != nil {
		f.t.Fatal(err)
	}
	words := []string{"copper kettle", "steel pan", "oak board", "glass jar", "cast iron skillet", "tea towel"}
	var ids []string
	for i := range n {
		price, stock := int64(100+i), int64(1000)
		p, err := f.st.CreateProduct(ctx, products.New{Name: fmt.Sprintf("%s %d", words[i%len(words)], i),
			Description: "A " + words[(i+1)%len(words)], Category: []string{"kitchen", "garden", "bath"}[i%3], PriceCents: &price, Stock: &stock})
		if err != nil {
			f.t.Fatal(err)
		}
		ids = append(ids, p.ProductID)
	}
	for i, id := range ids[:n/2] {
		if _, err := f.st.PlaceOrder(ctx, "u1", orders.Request{Items: []orders.Item{{ProductID: id, Quantity: 1 + i%3}}}, nil); err != nil {
			f.t.Fatal(err)
		}
		r := 1 + i%5
		if _, _, err := f.st.PutReview(ctx, id, "u1", reviews.Input{Rating: &r, Title: "t"}); err != nil {
			f.t.Fatal(err)
		}
	}
	f.idle()
	return ids
}

// searches runs a few queries and returns what each matched, by productId.
// Each query's page holds all its matches, and ranks are not compared:
// scores come from the index's statistics, which a rebuild does not keep
// (OpenSearch's count a document's replaced versions until a merge drops
// them), so a rebuilt index may rank the same documents differently. What
// the reindex must restore is which documents match, with what content.
func (f *fixture) searches() map[string]productsearch.Result {
	f.t.Helper()
	// Searches show the index as of its last refresh: refreshed, every
	// write so far (a dropped index has nothing to refresh).
	if status, raw := f.do("POST", "/products/_refresh", ""); status != 200 && status != 404 {
		f.t.Fatalf("refresh: %d %s", status, raw)
	}
	c := &productsearch.Client{URL: f.sys.SearchURL}
	out := map[string]productsearch.Result{}
	for _, q := range []productsearch.Query{{Text: "kettle", Size: 50}, {Text: "pan", Category: "garden", Size: 50}, {Text: "board jar", Size: 50}, {Text: "towel", Size: 50}} {
		res, err := c.Search(context.Background(), q)
		if err != nil {
			f.t.Fatal(err)
		}
		if len(res.Hits) != res.Total {
			f.t.Fatalf("%+v: got %d hits of %d, want all on one page", q, len(res.Hits), res.Total)
		}
		slices.SortFunc(res.Hits, func(a, b productsearch.Document) int { return strings.Compare(a.ProductID, b.ProductID) })
		// The hits and the total; not their places, whose scores move with
		// the index's statistics (a rebuilt index holds no deleted documents).
		res.Places = nil
		out[fmt.Sprintf("%+v", q)] = res
	}
	return out
}

func TestReindexRebuildsADroppedIndex(t *testing.T) {
	f := newFixture(t)
	ids := f.catalog(30)
	before := f.searches()
	if r := before[fmt.Sprintf("%+v", productsearch.Query{Text: "kettle", Size: 50})]; r.Total == 0 {
		t.Fatal("got no kettle before the drop, want the indexer's documents")
	}

	if status, raw := f.do("DELETE", "/products", ""); status != 200 {
		t.Fatalf("drop index: %d %s", status, raw)
	}
	if r := f.searches()[fmt.Sprintf("%+v", productsearch.Query{Text: "kettle", Size: 50})]; r.Total != 0 {
		t.Fatalf("after the drop: got %d hits, want none", r.Total)
	}
	rep := f.reindex()
	if rep.Indexed != len(ids) || rep.Deleted != 0 {
		t.Errorf("got %+v, want %d indexed, none deleted", rep, len(ids))
	}
	if diff := cmp.Diff(before, f.searches()); diff != "" {
		t.Errorf("search after the reindex (-before +after):\n%s", diff)
	}
	f.checkIndexMatchesTable(nil)
	// The index comes back with the indexer's settings: tombstones for 25 h.
	if _, raw := f.do("GET", "/products/_settings", ""); !bytes.Contains(raw, []byte(`"gc_deletes":"25h"`)) {
		t.Errorf("settings %s: want index.gc_deletes 25h", raw)
	}

	// Again, on a full index: every document is already at its version.
	rep = f.reindex()
	if rep.Indexed+rep.Newer != len(ids) || rep.Deleted != 0 {
		t.Errorf("second reindex: got %+v, want %d written or newer", rep, len(ids))
	}
}

func TestReindexRemovesDocumentsOfDeletedProducts(t *testing.T) {
	f := newFixture(t)
	ids := f.catalog(6)
	// The document of a product whose deletion the index never saw (a lost
	// batch, an index restored from a snapshot).
	stale := "01ARZ3NDEKTSV4RRFFQ69G5FAV"
	bulk := fmt.Sprintf("{\"index\":{\"_id\":%q,\"version\":3,\"version_type\":\"external_gte\"}}\n{\"productId\":%q,\"name\":\"ghost kettle\",\"version\":3}\n", stale, stale)
	if status, raw := f.do("POST", "/products/_bulk", bulk); status != 200 || bytes.Contains(raw, []byte(`"errors":true`)) {
		t.Fatalf("index stale doc: %d %s", status, raw)
	}
	rep := f.reindex()
	if rep.Deleted != 1 {
		t.Errorf("got %+v, want 1 deleted", rep)
	}
	// Searches no longer find it when the command ends: the index was
	// refreshed after the deletion.
	if status, raw := f.do("POST", "/products/_count", `{"query":{"match":{"name":"ghost"}}}`); status != 200 || !bytes.Contains(raw, []byte(`"count":0`)) {
		t.Errorf("count of ghost right after the reindex: %d %s, want 0", status, raw)
	}
	f.checkIndexMatchesTable([]string{stale})
	// A late write of the deleted product (its batch replayed, say) finds a
	// tombstone above any version it had.
	late := fmt.Sprintf("{\"index\":{\"_id\":%q,\"version\":99,\"version_type\":\"external_gte\"}}\n{\"productId\":%q,\"name\":\"ghost kettle\",\"version\":99}\n", stale, stale)
	if status, raw := f.do("POST", "/products/_bulk", late); status != 200 || !bytes.Contains(raw, []byte(`"status":409`)) {
		t.Errorf("late write of a deleted product: got %d %s, want a 409 conflict", status, raw)
	}
	if d := f.doc(stale); d != nil {
		t.Errorf("deleted product came back: %+v", d)
	}
	_ = ids
}

// The check of which indexed products still exist is a BatchGetItem: a key
// of a spent partition comes back unprocessed, as on AWS, and is asked for
// again until answered (the front's clock stands still until then).
func TestReindexAsksAgainForUnprocessedKeys(t *testing.T) {
	clock := stacktest.NewStillClock()
	// A partition for each key value, so that spending stale[0]'s leaves
	// the scan of the others its units.
	f := newFixtureWith(t, ddbfront.Limits{PartitionRCU: 10, Partitions: 1 << 30, Now: clock.Now})
	f.catalog(6)
	// Two documents of products no longer in the table, checked in one
	// batch; the first's partition is spent.
	stale := []string{"01ARZ3NDEKTSV4RRFFQ69G5FAV", "01ARZ3NDEKTSV4RRFFQ69G5FAW"}
	for _, id := range stale {
		bulk := fmt.Sprintf("{\"index\":{\"_id\":%q,\"version\":3,\"version_type\":\"external_gte\"}}\n{\"productId\":%q,\"name\":\"ghost kettle\",\"version\":3}\n", id, id)
		if status, raw := f.do("POST", "/products/_bulk", bulk); status != 200 || bytes.Contains(raw, []byte(`"errors":true`)) {
			t.Fatalf("index stale doc: %d %s", status, raw)
		}
	}
	f.idle()
	clock.Refill()
	// A product with no item still has its key's partition, which reads spend.
	stacktest.SpendReads(t, f.sys.DynamoDB(), tables.Physical(f.prefix, tables.Products),
		map[string]types.AttributeValue{"productId": &types.AttributeValueMemberS{Value: stale[0]}})
	stop := stacktest.RefillOnUnprocessed(t, f.sys.Stack, clock)
	rep := f.reindex()
	if !stop() {
		t.Errorf("no key came back unprocessed")
	}
	if rep.Deleted != 2 {
		t.Errorf("got %+v, want 2 deleted", rep)
	}
	f.checkIndexMatchesTable(stale)
}

func TestReindexDuringWriteLoadKeepsTheNewestVersion(t *testing.T) {
	f := newFixture(t)
	ids := f.catalog(24)
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	var writes atomic.Int64
	var mu sync.Mutex
	var gone []string
	var wg sync.WaitGroup
	for w := range 3 {
		wg.Go(func() {
			rnd := rand.New(rand.NewPCG(uint64(w), 11))
			for i := 0; ctx.Err() == nil; i++ {
				id := ids[rnd.IntN(len(ids)-3)]
				name := fmt.Sprintf("renamed kettle %d-%d", w, i)
				price := int64(rnd.IntN(10000))
				if _, err := f.st.PatchProduct(context.Background(), id, products.Patch{Name: &name, PriceCents: &price}, nil); err != nil {
					t.Errorf("patch: %v", err)
					return
				}
				writes.Add(1)
			}
		})
	}
	// Three products are deleted while the reindex runs.
	var deleted atomic.Bool
	wg.Go(func() {
		defer deleted.Store(true)
		for _, id := range ids[len(ids)-3:] {
			time.Sleep(150 * time.Millisecond)
			if err := f.st.DeleteProduct(context.Background(), id, nil); err != nil {
				t.Errorf("delete: %v", err)
				return
			}
			mu.Lock()
			gone = append(gone, id)
			mu.Unlock()
		}
	})
	var reps []reindex.Report
	for len(reps) < 3 || (len(reps) < 20 && (!deleted.Load() || writes.Load() < 60)) {
		reps = append(reps, f.reindex())
	}
	stop()
	wg.Wait()
	t.Logf("%d product writes during the reindexes; reports %+v", writes.Load(), reps)
	if writes.Load() < 10 {
		t.Fatalf("got %d writes during the reindex, want a load", writes.Load())
	}
	f.idle()
	f.checkIndexMatchesTable(gone)
}

func TestReindexRefusesAnIndexWithAnotherMapping(t *testing.T) {
	f := newFixture(t)
	f.catalog(2)
	f.do("DELETE", "/products", "")
	req, _ := http.NewRequest("PUT", "/products", strings.NewReader(`{"mappings":{"properties":{"productId":{"type":"text"}}}}`))
	req.Header.Set("Content-Type", "application/json")
	if resp, err := f.search.Perform(req); err != nil || resp.StatusCode != 200 {
		t.Fatalf("create index: %v %v", resp, err)
	}
	_, err := reindex.Run(context.Background(), f.config())
	if err == nil || !strings.Contains(err.Error(), "keyword") {
		t.Errorf("got %v, want an error naming the productId mapping", err)
	}
}

// TestReindexRaisesATableBehindItsIndex: a document above its product's
// version (the table restored to an earlier point, a document written
// outside the indexer) was refused to every reindex as "already newer", and
// to the live indexer until the product's version passed it: a search kept
// finding a name the table did not have. The reindex now raises the
// product's version above the document's, conditionally, and writes the
// document at it; a document the live indexer wrote ahead of the scan is
// left alone.
func TestReindexRaisesATableBehindItsIndex(t *testing.T) {
	f := newFixture(t)
	ids := f.catalog(3)
	f.idle()
	hijacked := ids[1]
	bulk := fmt.Sprintf("{\"index\":{\"_id\":%q,\"version\":1000,\"version_type\":\"external_gte\"}}\n{\"productId\":%q,\"name\":\"hijacked lamp\",\"category\":\"home\",\"priceCents\":1,\"version\":1000}\n", hijacked, hijacked)
	if status, raw := f.do("POST", "/products/_bulk", bulk); status != 200 || bytes.Contains(raw, []byte(`"errors":true`)) {
		t.Fatalf("index a document above the table: %d %s", status, raw)
	}
	rep := f.reindex()
	if len(rep.Raised) != 1 || !strings.HasPrefix(rep.Raised[0], hijacked+":") {
		t.Fatalf("got %+v, want %s raised", rep, hijacked)
	}
	p, err := f.st.GetProduct(context.Background(), hijacked)
	if err != nil {
		t.Fatal(err)
	}
	if d := f.doc(hijacked); d == nil || d.Name != p.Name || d.Version != 1001 {
		t.Errorf("document after the reindex: %+v, want %q at version 1001", d, p.Name)
	}
	f.idle() // the raise's own stream record reaches the live indexer, at the same version
	f.checkIndexMatchesTable(nil)
	// A second reindex finds nothing to raise.
	if rep := f.reindex(); len(rep.Raised) != 0 {
		t.Errorf("second reindex raised %v, want none", rep.Raised)
	}
}

// TestReindexIndexesAnUnreadableCounterAsNoneCounted: a product whose counter
// holds no integer (a hand edit) is indexed with it as none counted, as the
// indexer and the API show it, and named in the report for the operator,
// instead of being left out of the index as failed.
func TestReindexIndexesAnUnreadableCounterAsNoneCounted(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	ids := f.catalog(3)
	f.idle()
	if _, err := f.sys.DynamoDB().UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(tables.Physical(f.prefix, tables.Products)),
		Key:                       map[string]types.AttributeValue{"productId": &types.AttributeValueMemberS{Value: ids[1]}},
		UpdateExpression:          aws.String("SET unitsSold = :u"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":u": &types.AttributeValueMemberS{Value: "lots"}},
	}); err != nil {
		t.Fatal(err)
	}
	f.idle()
	if status, raw := f.do("DELETE", "/products", ""); status != 200 {
		t.Fatalf("drop index: %d %s", status, raw)
	}
	rep := f.reindex()
	if rep.Indexed != len(ids) || len(rep.Unreadable) != 1 || !strings.Contains(rep.Unreadable[0], ids[1]) || !strings.Contains(rep.Unreadable[0], "unitsSold") {
		t.Errorf("report %+v: want %d indexed and %s's unitsSold named unreadable", rep, len(ids), ids[1])
	}
	if d := f.doc(ids[1]); d == nil || d.UnitsSold != 0 {
		t.Errorf("document of %s: %+v, want it indexed with unitsSold 0", ids[1], d)
	}
}
