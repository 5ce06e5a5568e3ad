package ddblocal

import (
	"context"
	"testing"
	"time"
)

// TestJVMExitsWhenItsParentIsGone closes the JVM's standard input, as the
// OS does when the stack dies in any way (on macOS too, which has no
// parent-death signal): DynamoDB Local exits by itself.
func TestJVMExitsWhenItsParentIsGone(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	p, err := Start(ctx, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if err := p.parent.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.done:
	case <-time.After(20 * time.Second):
		t.Fatal("DynamoDB Local still runs 20 s after its standard input closed")
	}
}
