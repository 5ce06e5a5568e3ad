package ddbfront

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"
)

// DynamoDB Local (3.3.1) answers TransactWriteItems and ExecuteTransaction
// before the transaction is committed. It runs every SQLite statement on one
// thread (sqlite4java's SQLiteQueue, a FIFO); a transaction's commit is a job
// put on that queue, and the request thread returns without waiting for it
// (SQLiteDBAccess.commitTransaction enqueues the COMMIT and discards the
// job). A process killed after the answer and before the job ran leaves a hot
// rollback journal: at the next start SQLite rolls the acknowledged
// transaction back. Single-item writes wait for their own job and are
// committed when answered.
//
// The front closes that window with a barrier: it holds the answer to a
// committed transaction until a request of its own that waits for its job
// has come back. That job was queued after the answer was written, hence
// after the COMMIT job, and the queue runs jobs in order; once the barrier's
// answer arrives, the COMMIT has returned and the journal is gone.
// ListTables {"Limit":1} is such a request: one indexed SELECT on a metadata
// table, whatever the tables are. Transactions answered while a barrier is in
// flight share the next one, so concurrent clients pay one round trip
// between them.

// commitTargets are the operations DynamoDB Local answers before committing.
var commitTargets = map[string]bool{
	"DynamoDB_20120810.TransactWriteItems": true,
	"DynamoDB_20120810.ExecuteTransaction": true,
}

// barrier runs one request at a time on behalf of every waiter that arrived
// before it started. The stream follower (position.go) runs its passes on
// one too.
type barrier struct {
	run func(context.Context) error
	// timeout bounds one run; 0 means barrierTimeout.
	timeout time.Duration

	mu      sync.Mutex
	running bool
	waiting []chan error
	kicked  bool
}

// wait returns once a run that started after wait was called has ended,
// with that run's error.
func (b *barrier) wait(ctx context.Context) error {
	done := make(chan error, 1)
	b.mu.Lock()
	b.waiting = append(b.waiting, done)
	if !b.running {
		b.running = true
		go b.loop()
	}
	b.mu.Unlock()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// kick makes sure a run starts after it was called, without waiting for it.
func (b *barrier) kick() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.kicked = true
	if !b.running {
		b.running = true
		go b.loop()
	}
}

func (b *barrier) loop() {
	timeout := b.timeout
	if timeout == 0 {
		timeout = barrierTimeout
	}
	for {
		b.mu.Lock()
		batch, kicked := b.waiting, b.kicked
		b.waiting, b.kicked = nil, false
		if len(batch) == 0 && !kicked {
			b.running = false
			b.mu.Unlock()
			return
		}
		b.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		err := b.run(ctx)
		cancel()
		for _, done := range batch {
			done <- err
		}
	}
}

// barrierTimeout bounds one barrier request; DynamoDB Local answers it in
// milliseconds unless it is gone.
const barrierTimeout = 30 * time.Second

// listTablesBarrier asks DynamoDB Local for one table name.
func (f *Front) listTablesBarrier(ctx context.Context) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, f.cfg.Upstream+"/", bytes.NewReader([]byte(`{"Limit":1}`)))
	if err != nil {
		return fmt.Errorf("commit barrier: %w", err)
	}
	req.Header.Set("X-Amz-Target", "DynamoDB_20120810.ListTables")
	req.Header.Set("Content-Type", "application/x-amz-json-1.0")
	req.Header.Set("Authorization", "AWS4-HMAC-SHA256 Credential=local/20200101/us-east-1/dynamodb/aws4_request, SignedHeaders=host, Signature=0")
	resp, err := f.client.Do(req)
	if err != nil {
		return fmt.Errorf("commit barrier: %w", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("commit barrier: dynamodb local answered %d: %s", resp.StatusCode, body)
	}
	return nil
}
