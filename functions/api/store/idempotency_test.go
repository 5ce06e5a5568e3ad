package store_test

import (
	"context"
	"errors"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/google/go-cmp/cmp"

	"github.com/shopstream/shopstream/functions/api/store"
)

// TestKeepsWhatItIsGiven: the store keeps the value its caller gives under
// an idempotency key as it is, and a second claim of the key is ErrKeyUsed.
func TestKeepsWhatItIsGiven(t *testing.T) {
	s := newShapes(t)
	ctx := context.Background()
	kept := &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{
		"anything": &types.AttributeValueMemberL{Value: []types.AttributeValue{&types.AttributeValueMemberN{Value: "7"}, &types.AttributeValueMemberBOOL{Value: true}}},
	}}
	if err := s.st.Remember(ctx, "opaque-key", "hash-1", kept); err != nil {
		t.Fatal(err)
	}
	if err := s.st.Remember(ctx, "opaque-key", "hash-2", kept); !errors.Is(err, store.ErrKeyUsed) {
		t.Fatalf("second claim: got %v, want ErrKeyUsed", err)
	}
	got, ok, err := s.st.Recall(ctx, "opaque-key")
	if err != nil || !ok {
		t.Fatalf("recall: %v, %v", ok, err)
	}
	if got.RequestHash != "hash-1" {
		t.Errorf("got request hash %q, want hash-1", got.RequestHash)
	}
	if diff := cmp.Diff(kept, got.Kept, cmp.AllowUnexported(types.AttributeValueMemberM{}, types.AttributeValueMemberL{}, types.AttributeValueMemberN{}, types.AttributeValueMemberBOOL{})); diff != "" {
		t.Errorf("kept value changed (-given +recalled):\n%s", diff)
	}
}

// TestStoreKnowsNoHTTP: idempotency lives at the HTTP edge; the store
// imports nothing of HTTP.
func TestStoreKnowsNoHTTP(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		parsed, err := parser.ParseFile(token.NewFileSet(), f, src, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range parsed.Imports {
			if p := strings.Trim(imp.Path.Value, `"`); strings.HasPrefix(p, "net/http") || strings.Contains(p, "httpapi") {
				t.Errorf("%s imports %s", f, p)
			}
		}
	}
}
