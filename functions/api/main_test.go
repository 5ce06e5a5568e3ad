package main

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager/types"
	"github.com/google/go-cmp/cmp"

	"github.com/shopstream/shopstream/functions/api/httpapi"
	"github.com/shopstream/shopstream/shared/cursor"
	"github.com/shopstream/shopstream/shared/envcontract"
)

// versions is a fake of GetSecretValue holding one secret's staged values.
type versions struct {
	arn    string
	stages map[string]string
	asked  int
}

func (v *versions) GetSecretValue(_ context.Context, in *secretsmanager.GetSecretValueInput, _ ...func(*secretsmanager.Options)) (*secretsmanager.GetSecretValueOutput, error) {
	v.asked++
	val, ok := v.stages[aws.ToString(in.VersionStage)]
	if !ok || aws.ToString(in.SecretId) != v.arn {
		return nil, &types.ResourceNotFoundException{Message: aws.String("not found")}
	}
	return &secretsmanager.GetSecretValueOutput{SecretString: aws.String(val)}, nil
}

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

// TestCursorSecretFromSecretsManager: on AWS the configuration's cursor key
// is the secret's current value, read once, and the pending and previous
// values are kept to verify; locally CURSOR_SECRET is used as it is and
// Secrets Manager is never asked.
func TestCursorSecretFromSecretsManager(t *testing.T) {
	const arn = "arn:aws:secretsmanager:us-east-1:123456789012:secret:shopstream-dev-cursor-secret-AbCdEf"
	cur, prev := strings.Repeat("c", 48), strings.Repeat("p", 48)
	base := map[string]string{"USERS_TABLE": "u", "USER_EMAILS_TABLE": "e", "PRODUCTS_TABLE": "p", "PRODUCT_STOCK_TABLE": "ps", "REVIEWS_TABLE": "r", "CARTS_TABLE": "c", "ORDERS_TABLE": "o", "IDEMPOTENCY_KEYS_TABLE": "i"}

	onAWS := map[string]string{envcontract.CursorSecretARN: arn}
	for k, v := range base {
		onAWS[k] = v
	}
	sm := &versions{arn: arn, stages: map[string]string{"AWSCURRENT": cur, "AWSPREVIOUS": prev}}
	getenv, older, err := cursorSecret(context.Background(), env(onAWS), func() secretGetter { return sm })
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := httpapi.ConfigFromEnv(getenv)
	if err != nil {
		t.Fatal(err)
	}
	if got := string(cfg.CursorSecret); got != cur {
		t.Errorf("cursor key %q, want the current value", got)
	}
	if d := cmp.Diff([][]byte{[]byte(prev)}, older); d != "" {
		t.Errorf("older keys (-want +got):\n%s", d)
	}
	if sm.asked != 3 {
		t.Errorf("asked Secrets Manager %d times, want 3 (current, pending, previous)", sm.asked)
	}

	local := map[string]string{"CURSOR_SECRET": "shopstream-local-cursor-secret"}
	for k, v := range base {
		local[k] = v
	}
	getenv, older, err = cursorSecret(context.Background(), env(local), func() secretGetter {
		t.Fatal("Secrets Manager asked without CURSOR_SECRET_ARN")
		return nil
	})
	if err != nil || older != nil || getenv("CURSOR_SECRET") != "shopstream-local-cursor-secret" {
		t.Errorf("got %v, %v, %q, want CURSOR_SECRET as it is", err, older, getenv("CURSOR_SECRET"))
	}

	if _, _, err := cursorSecret(context.Background(), env(map[string]string{envcontract.CursorSecretARN: arn}), func() secretGetter { return &versions{arn: "other"} }); err == nil {
		t.Error("got no error for a secret without a current value")
	}
}

// TestCursorKeysFollowTheSecret: an environment reads the secret again a
// period after its last read, before the request that comes then, so both
// steps of a rotation reach it: the new key accepted (pending), then signing
// (current). A failed read keeps the keys it had.
func TestCursorKeysFollowTheSecret(t *testing.T) {
	const arn = "arn:aws:secretsmanager:us-east-1:123456789012:secret:shopstream-dev-cursor-secret-AbCdEf"
	const binding = "GET /products\ncategory=kitchen"
	oldKey, newKey := strings.Repeat("o", 48), strings.Repeat("n", 48)
	sm := &versions{arn: arn, stages: map[string]string{"AWSCURRENT": oldKey}}
	signer := cursor.NewSigner([]byte(oldKey))
	now := time.Unix(1_800_000_000, 0)
	k := newCursorKeys(arn, func() secretGetter { return sm }, signer, slog.New(slog.DiscardHandler))
	k.now, k.at = func() time.Time { return now }, now
	ctx := context.Background()
	signedWith := func(key string) string {
		tok, err := cursor.NewSigner([]byte(key)).Encode(binding, map[string]string{"after": "x"})
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	accepts := func(key string) bool {
		return signer.Decode(binding, signedWith(key), new(map[string]string)) == nil
	}

	// Step 1: the new key is pending. Within the period nothing is read.
	sm.stages["AWSPENDING"] = newKey
	now = now.Add(CursorKeysRefresh - time.Second)
	k.refresh(ctx)
	if sm.asked != 0 || accepts(newKey) {
		t.Fatalf("within the period: %d reads, new key accepted %v; want none, no", sm.asked, accepts(newKey))
	}
	now = now.Add(time.Second)
	k.refresh(ctx)
	if !accepts(newKey) || !accepts(oldKey) {
		t.Fatalf("after step 1: new key accepted %v, old %v; want both", accepts(newKey), accepts(oldKey))
	}

	// Step 2: the new key is current, the old one previous.
	sm.stages = map[string]string{"AWSCURRENT": newKey, "AWSPREVIOUS": oldKey}
	now = now.Add(CursorKeysRefresh)
	k.refresh(ctx)
	tok, err := signer.Encode(binding, map[string]string{"after": "y"})
	if err != nil {
		t.Fatal(err)
	}
	if cursor.NewSigner([]byte(newKey)).Decode(binding, tok, new(map[string]string)) != nil || !accepts(oldKey) {
		t.Fatal("after step 2: want cursors signed with the new key and the old one still accepted")
	}

	// The secret cannot be read: the keys stay, and the next try comes
	// soon, not a period later.
	sm.arn = "gone"
	now = now.Add(CursorKeysRefresh)
	asked := sm.asked
	k.refresh(ctx)
	k.refresh(ctx)
	if sm.asked != asked+1 || !accepts(newKey) {
		t.Fatalf("failed read: %d more reads, new key accepted %v; want 1 and yes", sm.asked-asked, accepts(newKey))
	}
	sm.arn = arn
	now = now.Add(cursorKeysRetry)
	k.refresh(ctx)
	if sm.asked == asked+1 {
		t.Fatalf("no read %v after a failed one", cursorKeysRetry)
	}

	if newCursorKeys("", nil, signer, nil) != nil {
		t.Error("keys refreshed without a secret (locally)")
	}
	var none *cursorKeys
	none.refresh(ctx) // locally: nothing to do
}
