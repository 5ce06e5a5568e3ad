package ddbfront_test

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"net/http/httptest"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"

	"github.com/shopstream/shopstream/infra/local/ddbfront"
	"github.com/shopstream/shopstream/infra/local/ddblocal"
	"github.com/shopstream/shopstream/infra/local/endpoints"
)

var killRounds = flag.Int("killrounds", 2, "rounds of TestAcknowledgedTransactionsSurviveKill")

// crashTables are three tables, each with a stream and a GSI, as an order
// touches them: the order, the product's stock and the user's counter.
var crashTables = []string{"orders", "stock", "counters"}

// crashRig is a DynamoDB Local on disk, restarted on the same directory after
// each kill, and optionally the front before it.
type crashRig struct {
	tb       testing.TB
	dir      string
	viaFront bool
	barrier  bool
	inMemory bool
	// limits are the front's AWS limits (on unless Off, as in the stack).
	limits ddbfront.Limits
	proc   *ddblocal.Process
	server *httptest.Server
	front  *ddbfront.Front
	db     *dynamodb.Client
}

func newCrashRig(tb testing.TB, viaFront, barrier bool) *crashRig {
	tb.Helper()
	return startRig(tb, &crashRig{tb: tb, dir: tb.TempDir(), viaFront: viaFront, barrier: barrier})
}

func startRig(tb testing.TB, r *crashRig) *crashRig {
	tb.Helper()
	r.start()
	tb.Cleanup(r.stop)
	for _, name := range crashTables {
		_, err := r.db.CreateTable(context.Background(), &dynamodb.CreateTableInput{
			TableName:   aws.String(name),
			BillingMode: types.BillingModePayPerRequest,
			KeySchema:   []types.KeySchemaElement{{AttributeName: aws.String("id"), KeyType: types.KeyTypeHash}},
			AttributeDefinitions: []types.AttributeDefinition{
				{AttributeName: aws.String("id"), AttributeType: types.ScalarAttributeTypeS},
				{AttributeName: aws.String("g"), AttributeType: types.ScalarAttributeTypeS},
			},
			GlobalSecondaryIndexes: []types.GlobalSecondaryIndex{{
				IndexName:  aws.String("byG"),
				KeySchema:  []types.KeySchemaElement{{AttributeName: aws.String("g"), KeyType: types.KeyTypeHash}},
				Projection: &types.Projection{ProjectionType: types.ProjectionTypeAll},
			}},
			StreamSpecification: &types.StreamSpecification{StreamEnabled: aws.Bool(true), StreamViewType: types.StreamViewTypeNewAndOldImages},
		})
		if err != nil {
			tb.Fatalf("create table %s: %v", name, err)
		}
	}
	// PartiQL's SET x = x + 1 needs the numbers to exist.
	seed := []struct{ table, id, g, attr string }{{"stock", "p1", "p", "sold"}}
	for c := 0; c < 8; c++ {
		seed = append(seed, struct{ table, id, g, attr string }{"counters", "u" + strconv.Itoa(c), "u", "orders"})
	}
	for _, it := range seed {
		if _, err := r.db.PutItem(context.Background(), &dynamodb.PutItemInput{TableName: aws.String(it.table), Item: map[string]types.AttributeValue{
			"id": &types.AttributeValueMemberS{Value: it.id}, "g": &types.AttributeValueMemberS{Value: it.g}, it.attr: num(0),
		}}); err != nil {
			tb.Fatalf("seed %s: %v", it.table, err)
		}
	}
	return r
}

// place writes one order, its stock and its counter in one transaction,
// with TransactWriteItems or, with partiql, ExecuteTransaction.
func place(db *dynamodb.Client, id, user string, partiql bool) error {
	s := func(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
	if partiql {
		_, err := db.ExecuteTransaction(context.Background(), &dynamodb.ExecuteTransactionInput{TransactStatements: []types.ParameterizedStatement{
			{Statement: aws.String(`INSERT INTO "orders" VALUE {'id': ?, 'g': ?}`), Parameters: []types.AttributeValue{s(id), s(user)}},
			{Statement: aws.String(`UPDATE "stock" SET sold = sold + 1 WHERE id = ?`), Parameters: []types.AttributeValue{s("p1")}},
			{Statement: aws.String(`UPDATE "counters" SET orders = orders + 1 WHERE id = ?`), Parameters: []types.AttributeValue{s(user)}},
		}})
		return err
	}
	_, err := db.TransactWriteItems(context.Background(), &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
		{Put: &types.Put{TableName: aws.String("orders"), Item: map[string]types.AttributeValue{"id": s(id), "g": s(user)},
			ConditionExpression: aws.String("attribute_not_exists(id)")}},
		{Update: &types.Update{TableName: aws.String("stock"), Key: map[string]types.AttributeValue{"id": s("p1")},
			UpdateExpression: aws.String("ADD sold :one"), ExpressionAttributeValues: map[string]types.AttributeValue{":one": num(1)}}},
		{Update: &types.Update{TableName: aws.String("counters"), Key: map[string]types.AttributeValue{"id": s(user)},
			UpdateExpression: aws.String("ADD orders :one"), ExpressionAttributeValues: map[string]types.AttributeValue{":one": num(1)}}},
	}})
	return err
}

// start runs DynamoDB Local on the rig's directory and, for the front path, a
// front before it.
func (r *crashRig) start() {
	r.tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir := r.dir
	if r.inMemory {
		dir = ""
	}
	p, err := ddblocal.Start(ctx, ddblocal.Options{DataDir: dir})
	if err != nil {
		r.tb.Fatalf("start dynamodb local: %v", err)
	}
	r.proc = p
	url := p.Endpoint()
	if r.viaFront {
		r.front, err = ddbfront.New(ctx, ddbfront.Config{
			Upstream: url,
			DynamoDB: dynamodb.NewFromConfig(endpoints.AWSConfig(), func(o *dynamodb.Options) { o.BaseEndpoint = aws.String(url) }),
			Streams: dynamodbstreams.NewFromConfig(endpoints.AWSConfig(), func(o *dynamodbstreams.Options) {
				o.BaseEndpoint = aws.String(url)
			}),
			CommitBarrier: r.barrier,
			Limits:        r.limits,
		})
		if err != nil {
			r.tb.Fatalf("start front: %v", err)
		}
		r.server = httptest.NewServer(r.front)
		url = r.server.URL
	}
	r.db = oneShotClient(url)
}

// oneShotClient makes one attempt per call: a write the JVM did not answer
// is simply not acknowledged.
func oneShotClient(url string) *dynamodb.Client {
	return dynamodb.NewFromConfig(endpoints.AWSConfig(), func(o *dynamodb.Options) {
		o.BaseEndpoint = aws.String(url)
		o.RetryMaxAttempts = 1
	})
}

func (r *crashRig) stop() {
	if r.server != nil {
		r.server.Close()
		r.server = nil
	}
	if r.front != nil {
		r.front.Close()
		r.front = nil
	}
	if r.proc != nil {
		r.proc.Close()
		r.proc = nil
	}
}

// roundResult counts one round: transactions acknowledged before the kill,
// and those of them missing after the restart.
type roundResult struct {
	acked, lost int
}

// round places orders from eight clients, kills DynamoDB Local's JVM with
// SIGKILL, restarts it on the same directory and reads every acknowledged
// order back. With onAck the kill comes the instant the k-th transaction is
// acknowledged (k random in [warm, warm+40)); otherwise at a random time in
// the 600 ms after the warm-th acknowledgement, as a user's kill -9 comes.
// It fails the test if the three tables disagree: a transaction is all or
// nothing. With partiql the transactions are ExecuteTransaction's.
func (r *crashRig) round(n int, onAck, partiql bool) roundResult {
	r.tb.Helper()
	const clients, warm = 8, 5
	killAt := warm + rand.IntN(40)
	delay := time.Duration(rand.IntN(600)) * time.Millisecond
	var (
		mu      sync.Mutex
		acked   []string
		warmed  = make(chan struct{})
		killed  atomic.Bool
		wg      sync.WaitGroup
		warming sync.Once
	)
	pid := r.proc.Pid()
	kill := func() {
		if killed.CompareAndSwap(false, true) {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	db := r.db
	for c := 0; c < clients; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; !killed.Load(); i++ {
				id := fmt.Sprintf("r%d-c%d-%d", n, c, i)
				user := "u" + strconv.Itoa(c)
				err := place(db, id, user, partiql)
				if slices.Contains(reasonCodes(err), "TransactionConflict") {
					// Another client's transaction holds the stock item,
					// as on AWS: not acknowledged, the client goes on.
					continue
				}
				if err != nil {
					if !killed.Load() {
						r.tb.Errorf("transaction before the kill: %v", err)
						kill()
					}
					return
				}
				mu.Lock()
				acked = append(acked, id)
				k := len(acked)
				mu.Unlock()
				if onAck && k >= killAt {
					kill()
				}
				if k >= warm {
					warming.Do(func() { close(warmed) })
				}
			}
		}()
	}
	if !onAck {
		select {
		case <-warmed:
			time.Sleep(delay)
			kill()
		case <-time.After(2 * time.Minute):
			r.tb.Errorf("round %d: fewer than %d transactions acknowledged in 2 minutes", n, warm)
			kill()
		}
	}
	wg.Wait()
	r.proc.Close()
	r.stop()
	r.start()

	res := roundResult{acked: len(acked)}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, id := range acked {
		out, err := r.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String("orders"), ConsistentRead: aws.Bool(true),
			Key: map[string]types.AttributeValue{"id": &types.AttributeValueMemberS{Value: id}}})
		if err != nil {
			r.tb.Fatalf("read back %s: %v", id, err)
		}
		if out.Item == nil {
			res.lost++
		}
	}
	r.checkAtomic(ctx)
	return res
}

// checkAtomic compares the orders with the stock and counter totals.
func (r *crashRig) checkAtomic(ctx context.Context) {
	r.tb.Helper()
	orders, err := r.db.Scan(ctx, &dynamodb.ScanInput{TableName: aws.String("orders"), Select: types.SelectCount})
	if err != nil {
		r.tb.Fatalf("count orders: %v", err)
	}
	total := func(table, attr string) int {
		out, err := r.db.Scan(ctx, &dynamodb.ScanInput{TableName: aws.String(table)})
		if err != nil {
			r.tb.Fatalf("scan %s: %v", table, err)
		}
		sum := 0
		for _, it := range out.Items {
			n, _ := strconv.Atoi(it[attr].(*types.AttributeValueMemberN).Value)
			sum += n
		}
		return sum
	}
	if sold, counted := total("stock", "sold"), total("counters", "orders"); sold != int(orders.Count) || counted != int(orders.Count) {
		r.tb.Fatalf("after restart: %d orders, stock says %d sold, counters say %d: a transaction was applied in part", orders.Count, sold, counted)
	}
}

// TestAcknowledgedTransactionsSurviveKill kills DynamoDB Local the instant the
// front has acknowledged a transaction (TransactWriteItems, then
// ExecuteTransaction in the next round), restarts it on the same directory and
// reads every acknowledged transaction back. Without the commit barrier the
// transaction acknowledged just before the kill is lost in most rounds
// (BenchmarkKillLoss measures it).
func TestAcknowledgedTransactionsSurviveKill(t *testing.T) {
	r := newCrashRig(t, true, true)
	var acked, lost int
	for n := 0; n < *killRounds; n++ {
		res := r.round(n, true, n%2 == 1)
		acked += res.acked
		lost += res.lost
	}
	t.Logf("%d rounds, %d acknowledged, %d lost", *killRounds, acked, lost)
	if acked == 0 {
		t.Fatal("no transaction acknowledged before the kills")
	}
	if lost != 0 {
		t.Errorf("lost after kill -9: got %d of %d acknowledged transactions, want 0", lost, acked)
	}
}

// BenchmarkKillLoss is the long run of the kill test: each iteration is one
// round (-benchtime 50x for fifty), straight to DynamoDB Local and through the
// front, killing at a random time (as a user's kill -9 does) or the instant a
// transaction is acknowledged (the worst case), with TransactWriteItems or
// ExecuteTransaction.
func BenchmarkKillLoss(b *testing.B) {
	for _, c := range []struct {
		name                              string
		viaFront, barrier, onAck, partiql bool
	}{
		{"direct/random", false, false, false, false},
		{"direct/on-ack", false, false, true, false},
		{"front/random", true, true, false, false},
		{"front/on-ack", true, true, true, false},
		{"direct/on-ack-partiql", false, false, true, true},
		{"front/on-ack-partiql", true, true, true, true},
	} {
		b.Run(c.name, func(b *testing.B) {
			r := newCrashRig(b, c.viaFront, c.barrier)
			var acked, lost, lossy int
			for n := 0; n < b.N; n++ {
				res := r.round(n, c.onAck, c.partiql)
				acked += res.acked
				lost += res.lost
				if res.lost > 0 {
					lossy++
				}
			}
			b.ReportMetric(float64(b.N), "rounds")
			b.ReportMetric(float64(acked), "acked")
			b.ReportMetric(float64(lost), "lost")
			b.ReportMetric(float64(lossy)/float64(b.N), "lossy-rounds/round")
		})
	}
}

// BenchmarkTransactions measures TransactWriteItems throughput from eight
// clients through two fronts on one DynamoDB Local, one with the commit
// barrier and one without, in alternating chunks so that both see the same
// machine; on disk (make run with DATA_DIR) and in memory. Both fronts run
// without AWS's limits: the eight clients' transactions all update one
// item, which AWS (and the front, limits on) answers with
// TransactionConflict; the barrier's cost is what is measured.
func BenchmarkTransactions(b *testing.B) {
	for _, medium := range []string{"disk", "memory"} {
		b.Run(medium, func(b *testing.B) {
			off := ddbfront.Limits{Off: true}
			r := startRig(b, &crashRig{tb: b, dir: b.TempDir(), viaFront: true, barrier: true, inMemory: medium == "memory", limits: off})
			plain, err := ddbfront.New(context.Background(), ddbfront.Config{Upstream: r.proc.Endpoint(), Limits: off})
			if err != nil {
				b.Fatal(err)
			}
			defer plain.Close()
			srv := httptest.NewServer(plain)
			defer srv.Close()
			clients := []*dynamodb.Client{oneShotClient(srv.URL), r.db} // without, with
			var spent [2]time.Duration
			var done [2]int
			const chunk = 40
			b.ResetTimer()
			for n := 0; n < b.N; n += chunk {
				size := min(chunk, b.N-n)
				for k := 0; k < 2; k++ {
					i := (k + n/chunk) % 2
					start := time.Now()
					transactions(b, clients[i], fmt.Sprintf("c%d-%d-", i, n), size)
					spent[i] += time.Since(start)
					done[i] += size
				}
			}
			without := float64(done[0]) / spent[0].Seconds()
			with := float64(done[1]) / spent[1].Seconds()
			b.ReportMetric(without, "tx/s-no-barrier")
			b.ReportMetric(with, "tx/s-barrier")
			b.ReportMetric(with/without, "ratio")
		})
	}
}

// transactions runs n two-table transactions from eight clients.
func transactions(b *testing.B, db *dynamodb.Client, prefix string, n int) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for c := 0; c < 8; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := next.Add(1); i <= int64(n); i = next.Add(1) {
				_, err := db.TransactWriteItems(context.Background(), &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
					{Put: &types.Put{TableName: aws.String("orders"), Item: map[string]types.AttributeValue{
						"id": &types.AttributeValueMemberS{Value: prefix + strconv.FormatInt(i, 10)}, "g": &types.AttributeValueMemberS{Value: "u"},
					}}},
					{Update: &types.Update{TableName: aws.String("stock"), Key: map[string]types.AttributeValue{"id": &types.AttributeValueMemberS{Value: "p1"}},
						UpdateExpression: aws.String("ADD sold :one"), ExpressionAttributeValues: map[string]types.AttributeValue{":one": num(1)}}},
				}})
				if err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
}
