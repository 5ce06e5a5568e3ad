package audit_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/shopstream/shopstream/infra/local/endpoints"
	"github.com/shopstream/shopstream/infra/local/stacktest"
	"github.com/shopstream/shopstream/infra/ops/audit"
	"github.com/shopstream/shopstream/shared/clock"
	"github.com/shopstream/shopstream/shared/facts"
	"github.com/shopstream/shopstream/shared/tables"
)

// BenchmarkAudit audits 10,000 orders (a tenth of them in the archive, a
// tenth cancelled) and 10,000 reviews of 1,000 users and 500 products, each
// fact marked as the counters mark it, with nothing in flight: the time is
// the scans (markers included), the archive and the comparison (the settle
// wait, a fixed cost, is 1 ms here). The first audit downloads the archive
// and writes its digest (ms/first-audit); the next ones (ms/audit) download
// nothing. AUDIT_BENCH_SCALE=10
// multiplies every size (100,000 orders and 100,000 reviews of 10,000 users
// and 5,000 products).
func BenchmarkAudit(b *testing.B) {
	scale := 1
	if v := os.Getenv("AUDIT_BENCH_SCALE"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			b.Fatalf("AUDIT_BENCH_SCALE=%q: want a positive integer", v)
		}
		scale = n
	}
	nUsers, nProducts, nOrders, nReviews, archived := 1000*scale, 500*scale, 10000*scale, 10000*scale, 1000*scale
	st := stacktest.Dedicated(b, endpoints.Config{TTLSweepInterval: -1, Buckets: []string{"bench-archive"}})
	ctx := context.Background()
	db := st.DynamoDB()
	prefix := stacktest.OwnPrefix(b)
	if err := tables.Create(ctx, db, prefix); err != nil {
		b.Fatal(err)
	}
	name := func(t string) string { return tables.Physical(prefix, t) }
	base := time.Now().Add(-48 * time.Hour)
	old := clock.Format(base)
	users := make([]map[string]int64, nUsers)
	prods := make([]map[string]int64, nProducts)
	for i := range users {
		users[i] = map[string]int64{}
	}
	for i := range prods {
		prods[i] = map[string]int64{}
	}
	var orderItems, markerItems []map[string]any
	var lines [][]byte
	mark := func(fs ...facts.Fact) {
		for _, f := range fs {
			var effects any
			if err := attributevalue.Unmarshal(facts.EncodeEffects(f.Effects), &effects); err != nil {
				b.Fatal(err)
			}
			markerItems = append(markerItems, map[string]any{facts.KeyAttr: f.Key, facts.EffectsAttr: effects})
		}
	}
	for i := range nOrders {
		u := i % nUsers
		status := "DELIVERED"
		if i%10 == 3 {
			status = "CANCELLED"
		}
		var ls []map[string]any
		var fl []facts.Line
		var total int64
		for k := range 1 + i%3 {
			p := (i*7 + k*13) % nProducts
			ls = append(ls, map[string]any{"productId": fmt.Sprintf("p%04d", p), "productName": "x", "unitPriceCents": 100 + p, "quantity": 1 + k})
			fl = append(fl, facts.Line{ProductID: fmt.Sprintf("p%04d", p), Quantity: int64(1 + k)})
			total += int64((100 + p) * (1 + k))
			if status != "CANCELLED" {
				prods[p]["unitsSold"] += int64(1 + k)
			}
		}
		users[u]["orderCount"]++
		if status != "CANCELLED" {
			users[u]["lifetimeSpendCents"] += total
		}
		o := map[string]any{"userId": fmt.Sprintf("u%04d", u), "orderId": fmt.Sprintf("o%06d", i), "status": status,
			"totalCents": total, "lines": ls, "createdAt": old, "updatedAt": old, "version": 3}
		mark(facts.OfOrder(facts.Order{UserID: fmt.Sprintf("u%04d", u), OrderID: fmt.Sprintf("o%06d", i), Status: status, TotalCents: total, Lines: fl})...)
		if i < archived {
			l, _ := json.Marshal(map[string]any{"eventId": fmt.Sprintf("e%06d", i), "table": "orders", "keys": map[string]any{}, "item": o, "removedAt": old})
			lines = append(lines, l)
			continue
		}
		orderItems = append(orderItems, o)
	}
	var reviewItems []map[string]any
	for i := range nReviews {
		u, p := i%nUsers, (i/nUsers*37+i)%nProducts
		rating := 1 + i%5
		// Reviews are written at distinct times, as users write them: one
		// createdAt for all would pile every review on one sort key in the
		// indexes, which DynamoDB Local stores at a cost growing with the pile.
		created := clock.Format(base.Add(time.Duration(i) * time.Millisecond))
		users[u]["reviewCount"]++
		prods[p]["reviewCount"]++
		prods[p]["ratingTotal"] += int64(rating)
		reviewItems = append(reviewItems, map[string]any{"productId": fmt.Sprintf("p%04d", p), "userId": fmt.Sprintf("u%04d", u),
			"rating": rating, "title": "t", "createdAt": created, "updatedAt": created, "version": 1})
		mark(facts.In(facts.Review{ProductID: fmt.Sprintf("p%04d", p), UserID: fmt.Sprintf("u%04d", u), CreatedAt: created, Version: 1, Rating: int64(rating)}))
	}
	var userItems, productItems []map[string]any
	for i, c := range users {
		item := map[string]any{"userId": fmt.Sprintf("u%04d", i), "version": 9}
		for k, v := range c {
			item[k] = v
		}
		userItems = append(userItems, item)
	}
	for i, c := range prods {
		item := map[string]any{"productId": fmt.Sprintf("p%04d", i), "category": "c", "version": 9}
		for k, v := range c {
			item[k] = v
		}
		productItems = append(productItems, item)
	}
	for _, l := range []struct {
		table string
		items []map[string]any
	}{{tables.Users, userItems}, {tables.Products, productItems}, {tables.Orders, orderItems}, {tables.Reviews, reviewItems}, {tables.CounterEvents, markerItems}} {
		start := time.Now()
		stacktest.Load(b, db, name(l.table), l.items)
		b.Logf("loaded %d %s in %v", len(l.items), l.table, time.Since(start).Round(time.Millisecond))
	}
	s3c := st.S3()
	for start := 0; start < len(lines); start += 100 {
		var buf bytes.Buffer
		zw := gzip.NewWriter(&buf)
		for _, l := range lines[start:min(start+100, len(lines))] {
			zw.Write(append(l, '\n'))
		}
		zw.Close()
		if _, err := s3c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("bench-archive"),
			Key: aws.String(fmt.Sprintf("orders/year=2026/month=01/day=01/%04d.jsonl.gz", start)), Body: bytes.NewReader(buf.Bytes())}); err != nil {
			b.Fatal(err)
		}
	}
	a := audit.New(audit.Config{DB: db, S3: s3c, Bucket: "bench-archive", Settle: time.Millisecond,
		Tables: tables.Names{Users: name(tables.Users), Products: name(tables.Products), Orders: name(tables.Orders), Reviews: name(tables.Reviews),
			CounterEvents: name(tables.CounterEvents)}})
	check := func(rep audit.Report, err error, read int) {
		b.Helper()
		if err != nil {
			b.Fatal(err)
		}
		if rep.ExitCode() != 0 || rep.Orders+rep.ArchivedOrders != nOrders || rep.Reviews != nReviews || rep.Missing != 0 || rep.ArchiveRead != read {
			b.Fatalf("got %+v, want every counter right, every order and review read, %d archive objects downloaded", rep, read)
		}
	}
	b.ResetTimer()
	// The first audit reads the whole archive and writes its digest.
	start := time.Now()
	rep, err := a.Run(ctx)
	check(rep, err, (archived+99)/100)
	first := time.Since(start)
	start = time.Now()
	n := 0
	for b.Loop() {
		rep, err := a.Run(ctx)
		check(rep, err, 0)
		n++
	}
	b.ReportMetric(float64(time.Since(start).Milliseconds())/float64(n), "ms/audit")
	b.ReportMetric(float64(first.Milliseconds()), "ms/first-audit")
}
