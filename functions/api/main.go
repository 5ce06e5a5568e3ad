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
	"time"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-lambda-go/lambdacontext"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/shopstream/shopstream/functions/api/httpapi"
	"github.com/shopstream/shopstream/shared/cursor"
	"github.com/shopstream/shopstream/shared/productsearch"
	"github.com/shopstream/shopstream/shared/store"
)

func main() {
	if err := run(context.Background(), os.Getenv); err != nil {
		slog.New(slog.NewJSONHandler(os.Stderr, nil)).Error("api stopped", "error", err.Error())
		os.Exit(1)
	}
}

func run(ctx context.Context, getenv func(string) string) error {
	cfg, err := httpapi.ConfigFromEnv(getenv)
	if err != nil {
		return fmt.Errorf("config: %w", err)
	}
	awsCfg, err := config.LoadDefaultConfig(ctx,
		config.WithRetryer(func() aws.Retryer { return retry.NewAdaptiveMode() }))
	if err != nil {
		return fmt.Errorf("aws config: %w", err)
	}
	db := dynamodb.NewFromConfig(awsCfg)
	st := store.New(db, store.Config{Tables: cfg.Tables, CartTTL: cfg.CartTTL, OrderRetention: cfg.OrderRetention})

	var search httpapi.Searcher
	if cfg.SearchURL != "" {
		client := &productsearch.Client{URL: cfg.SearchURL, HTTP: &http.Client{Timeout: 5 * time.Second}}
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
	h := httpapi.New(httpapi.Deps{
		Store:   st,
		Cursors: cursor.NewSigner(cfg.CursorSecret),
		Search:  search,
		Logger:  lambdacontext.NewLogger(),
		Metrics: os.Stdout,
	})
	lambda.StartHandlerFunc(h.Handle)
	return nil
}
