// Command api is the Lambda behind API Gateway's HTTP API: every route of the
// contract, served by package httpapi.
package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-lambda-go/lambdacontext"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"

	"github.com/shopstream/shopstream/functions/api/httpapi"
	"github.com/shopstream/shopstream/functions/api/store"
	"github.com/shopstream/shopstream/shared/cursor"
	"github.com/shopstream/shopstream/shared/envcontract"
	"github.com/shopstream/shopstream/shared/productsearch"
	"github.com/shopstream/shopstream/shared/stagedsecret"
	"github.com/shopstream/shopstream/shared/tracing"
)

func main() {
	if err := run(context.Background(), os.Getenv); err != nil {
		slog.New(slog.NewJSONHandler(os.Stderr, nil)).Error("api stopped", "error", err.Error())
		os.Exit(1)
	}
}

func run(ctx context.Context, getenv func(string) string) error {
	awsCfg, err := config.LoadDefaultConfig(ctx,
		config.WithRetryer(func() aws.Retryer { return retry.NewAdaptiveMode() }))
	if err != nil {
		return fmt.Errorf("aws config: %w", err)
	}
	sm := func() secretGetter { return secretsmanager.NewFromConfig(awsCfg) }
	arn := getenv(envcontract.CursorSecretARN)
	getenv, olderCursorKeys, err := cursorSecret(ctx, getenv, sm)
	if err != nil {
		return err
	}
	cfg, err := httpapi.ConfigFromEnv(getenv)
	if err != nil {
		return fmt.Errorf("config: %w", err)
	}
	tr, err := tracing.ForFunction(ctx, "api", getenv, awsCfg)
	if err != nil {
		return err
	}
	db := dynamodb.NewFromConfig(awsCfg, tr.DynamoDB(), tracing.Stamp(tracing.StreamedTables(cfg.Tables)...))
	logger := tracing.Logger(lambdacontext.NewLogger().With("function", "api"))
	st := store.New(db, store.Config{Tables: cfg.Tables, CartTTL: cfg.CartTTL, OrderRetention: cfg.OrderRetention, Logger: logger})

	var search httpapi.Searcher
	if cfg.SearchURL != "" {
		client := &productsearch.Client{URL: cfg.SearchURL, HTTP: &http.Client{Timeout: 5 * time.Second, Transport: tr.Transport(nil)}}
		if cfg.SearchSigned {
			signer := v4.NewSigner()
			client.Sign = func(r *http.Request, body []byte) error {
				creds, err := awsCfg.Credentials.Retrieve(r.Context())
				if err != nil {
					return fmt.Errorf("search credentials: %w", err)
				}
				sum := sha256.Sum256(body)
				return signer.SignHTTP(r.Context(), creds, r, hex.EncodeToString(sum[:]), "es", awsCfg.Region, time.Now())
			}
		}
		search = client
	}
	signer := cursor.NewSigner(cfg.CursorSecret, olderCursorKeys...)
	h := httpapi.New(httpapi.Deps{
		Store:   st,
		Cursors: signer,
		Search:  search,
		Logger:  logger,
		Metrics: os.Stdout,
		Tracing: tr,
	})
	keys := newCursorKeys(arn, sm, signer, logger)
	lambda.StartHandlerFunc(tracing.Flushing(tr, func(ctx context.Context, ev events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
		keys.refresh(ctx)
		return h.Handle(ctx, ev)
	}))
	return nil
}

// CursorKeysRefresh is how often an execution environment reads the cursor
// secret again, before the first request after: a step of a key rotation
// (docs/deploy.md, "Rotating the cursor key") reaches every environment
// that serves within this time, where a read at start alone never reached
// the environments of a published version. Three GetSecretValue calls per
// environment per period.
const CursorKeysRefresh = 5 * time.Minute

// cursorKeysRetry is how soon a failed read of the cursor secret is tried
// again: well inside the margin the rotation procedure leaves after its
// 5 minutes (docs/deploy.md).
const cursorKeysRetry = 15 * time.Second

// cursorKeys keeps a signer's keys as the secret's staged values are.
type cursorKeys struct {
	arn    string
	sm     func() secretGetter
	signer *cursor.Signer
	log    *slog.Logger
	every  time.Duration
	now    func() time.Time

	mu sync.Mutex
	at time.Time // of the last read, or of the start
}

// newCursorKeys returns nil without a secret (locally: CURSOR_SECRET).
func newCursorKeys(arn string, sm func() secretGetter, signer *cursor.Signer, log *slog.Logger) *cursorKeys {
	if arn == "" {
		return nil
	}
	return &cursorKeys{arn: arn, sm: sm, signer: signer, log: log, every: CursorKeysRefresh, now: time.Now, at: time.Now()}
}

// refresh reads the secret again when the last read is a period old. A
// failed read keeps the keys it has and is tried again cursorKeysRetry
// later (a request is never refused for it).
func (k *cursorKeys) refresh(ctx context.Context) {
	if k == nil {
		return
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.now().Sub(k.at) < k.every {
		return
	}
	k.at = k.now()
	sec, err := stagedsecret.Load(ctx, k.sm(), k.arn)
	if err != nil {
		k.at = k.now().Add(cursorKeysRetry - k.every)
		k.log.WarnContext(ctx, "cursor secret not read again; the keys read before stay", "error", err.Error(), "retryIn", cursorKeysRetry.String())
		return
	}
	k.signer.Rotate(sec.Current, sec.Others...)
}

type secretGetter interface {
	GetSecretValue(context.Context, *secretsmanager.GetSecretValueInput, ...func(*secretsmanager.Options)) (*secretsmanager.GetSecretValueOutput, error)
}

// cursorSecret reads the cursor key at init from the secret
// CURSOR_SECRET_ARN names: its current value becomes CURSOR_SECRET for the
// configuration, and the values a rotation keeps valid (pending, previous)
// are returned to be accepted too. Without CURSOR_SECRET_ARN, getenv is
// returned as it is.
func cursorSecret(ctx context.Context, getenv func(string) string, client func() secretGetter) (func(string) string, [][]byte, error) {
	arn := getenv(envcontract.CursorSecretARN)
	if arn == "" {
		return getenv, nil, nil
	}
	sec, err := stagedsecret.Load(ctx, client(), arn)
	if err != nil {
		return nil, nil, fmt.Errorf("cursor secret: %w", err)
	}
	current := string(sec.Current)
	return func(k string) string {
		if k == envcontract.CursorSecret {
			return current
		}
		return getenv(k)
	}, sec.Others, nil
}
