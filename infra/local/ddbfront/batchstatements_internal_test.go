package ddbfront

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/shopstream/shopstream/shared/tables"
)

// statementsLimiter is a limiter that knows table "t", keyed by pk alone.
func statementsLimiter(db *dynamodb.Client, cfg Limits) *limiter {
	l := newLimiter(cfg, db)
	l.schemas.byName["t"] = tables.Table{Name: "t", PartitionKey: tables.Key{Name: "pk"}}
	return l
}

// drainPartition spends far more than the write units of pk's partition.
func drainPartition(l *limiter, pk string) {
	l.charge(bucketKey{table: "t", pk: valueText(s(pk)), write: true}, 1e9)
}

// twoInserts is a BatchExecuteStatement of two INSERTs into "t".
const twoInserts = `{"Statements":[{"Statement":"INSERT INTO \"t\" VALUE {'pk': 'a'}"},{"Statement":"INSERT INTO \"t\" VALUE {'pk': 'b'}"}]}`

// A batch whose statements were all throttled is answered by the front
// alone (refusedAll), with no answer of DynamoDB Local to decide it: its
// writes, never sent, must not stay in flight as undecided for a minute.
func TestABatchWhoseStatementsAreAllThrottledLeavesNoWriteInFlight(t *testing.T) {
	l := statementsLimiter(nil, Limits{})
	drainPartition(l, "a")
	drainPartition(l, "b")
	adm, refused := l.admitBatchStatements(context.Background(), []byte(twoInserts))
	if refused != nil || adm == nil || !adm.refusedAll() {
		t.Fatalf("want every statement refused: adm %v refused %v", adm, refused)
	}
	adm.release() // as front.go's deferred release after the refusedAll answer
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, id := range []string{"t\x00S:a", "t\x00S:b"} {
		if fl := l.flights[id]; fl != nil {
			t.Errorf("%q: a statement never sent is still in flight: count %d undecided %d (kept undecidedFor)", id, fl.count, fl.undecided)
		}
	}
}

// One statement throttled, one admitted, the batch answered 200: the
// throttled statement, never sent, must not stay in flight to the answer
// nor be recorded as a committed write.
func TestAThrottledStatementIsNeitherInFlightNorRecorded(t *testing.T) {
	l := statementsLimiter(nil, Limits{StaleReads: time.Second})
	drainPartition(l, "a")
	adm, refused := l.admitBatchStatements(context.Background(), []byte(twoInserts))
	if refused != nil || adm == nil || adm.rewrite == nil || adm.rewrite.statementErrors[0] == nil || adm.rewrite.statementErrors[1] != nil {
		t.Fatalf("want statement 0 throttled, 1 admitted")
	}
	l.mu.Lock()
	fa := l.flights["t\x00S:a"]
	l.mu.Unlock()
	if fa != nil {
		t.Errorf("throttled statement's item in flight until the batch's answer: count %d", fa.count)
	}
	adm.chargeAnswer(context.Background(), 200, []byte(`{"Responses":[{}]}`))
	adm.release()
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.recent["t\x00S:a"]; ok {
		t.Errorf("the throttled statement, never sent, recorded as a committed write (StaleReads)")
	}
}

// A batch whose pricing read fails goes on unpriced: its writes are still
// writes in progress, which a read transaction of their items meets.
func TestAnUnpricedBatchsWritesAreInProgress(t *testing.T) {
	db := dynamodb.New(dynamodb.Options{Region: "us-east-1", BaseEndpoint: aws.String("http://127.0.0.1:1"),
		Credentials: aws.AnonymousCredentials{}, RetryMaxAttempts: 1})
	l := statementsLimiter(db, Limits{})
	body := `{"Statements":[{"Statement":"UPDATE \"t\" SET v = 2 WHERE pk = 'a'"}]}`
	adm, refused := l.admitBatchStatements(context.Background(), []byte(body))
	if refused != nil || adm == nil || !adm.untracked {
		t.Fatalf("want admitted untracked: %v %v", adm, refused)
	}
	defer adm.releaseNow()
	l.mu.Lock()
	n := l.writes["t\x00S:a"]
	l.mu.Unlock()
	if n != 1 {
		t.Errorf("l.writes of the unpriced statement's item = %d, want 1", n)
	}
	if _, refused := l.admitTransactGet(context.Background(), "TransactGetItems", []ref{{table: "t", id: "t\x00S:a", kind: "Get", key: map[string]types.AttributeValue{"pk": s("a")}}}); refused == nil {
		t.Errorf("a read transaction of the item admitted while the batch's write is in progress")
	}
}
