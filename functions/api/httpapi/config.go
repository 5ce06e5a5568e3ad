package httpapi

import (
	"fmt"
	"time"

	"github.com/shopstream/shopstream/functions/api/store"
	"github.com/shopstream/shopstream/shared/envcontract"
	"github.com/shopstream/shopstream/shared/productsearch"
	"github.com/shopstream/shopstream/shared/wiring"
)

// Config is the API's configuration from its environment.
type Config struct {
	Tables store.Tables
	// CursorSecret signs page cursors (CURSOR_SECRET).
	CursorSecret []byte
	// CartTTL (CART_TTL, default 168h) and OrderRetention (ORDER_RETENTION,
	// default 8760h) are Go durations.
	CartTTL, OrderRetention time.Duration
	// SearchURL is the products search endpoint (SEARCH_URL); "" disables /search.
	SearchURL string
	// SearchSigned says whether search requests are SigV4-signed
	// (productsearch.Signed: SEARCH_SIGV4, else whether SearchURL is AWS's).
	SearchSigned bool
}

// ConfigFromEnv reads the configuration the API's contract declares
// (shared/envcontract): its tables' names, CURSOR_SECRET (required),
// CART_TTL, ORDER_RETENTION, SEARCH_URL, SEARCH_SIGV4.
func ConfigFromEnv(getenv func(string) string) (Config, error) {
	t, err := envcontract.Of(wiring.API).ReadTables(getenv)
	if err != nil {
		return Config{}, err
	}
	cfg := Config{Tables: t, CursorSecret: []byte(getenv(envcontract.CursorSecret)), SearchURL: getenv(envcontract.SearchURL)}
	if len(cfg.CursorSecret) < 16 {
		return Config{}, fmt.Errorf("%s: at least 16 bytes are required", envcontract.CursorSecret)
	}
	if cfg.CartTTL, err = envcontract.Duration(getenv, envcontract.CartTTL, envcontract.DefaultCartTTL); err != nil {
		return Config{}, err
	}
	if cfg.OrderRetention, err = envcontract.Duration(getenv, envcontract.OrderRetention, envcontract.DefaultOrderRetention); err != nil {
		return Config{}, err
	}
	if cfg.SearchURL != "" {
		if cfg.SearchSigned, err = productsearch.Signed(cfg.SearchURL, getenv(envcontract.SearchSigV4)); err != nil {
			return Config{}, err
		}
	}
	return cfg, nil
}
