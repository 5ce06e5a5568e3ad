package httpapi

import (
	"fmt"
	"time"

	"github.com/shopstream/shopstream/functions/api/store"
	"github.com/shopstream/shopstream/shared/productsearch"
)

// DevCursorSecret is the cursor key of the local stack; deployed stages set
// CURSOR_SECRET.
const DevCursorSecret = "shopstream-local-cursor-secret"

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

// ConfigFromEnv reads the configuration: table names from each table's
// EnvVar, CURSOR_SECRET (required), CART_TTL, ORDER_RETENTION, SEARCH_URL,
// SEARCH_SIGV4.
func ConfigFromEnv(getenv func(string) string) (Config, error) {
	t, err := store.TablesFromEnv(getenv)
	if err != nil {
		return Config{}, err
	}
	cfg := Config{Tables: t, CursorSecret: []byte(getenv("CURSOR_SECRET")), SearchURL: getenv("SEARCH_URL")}
	if len(cfg.CursorSecret) < 16 {
		return Config{}, fmt.Errorf("CURSOR_SECRET: at least 16 bytes are required")
	}
	if cfg.CartTTL, err = duration(getenv, "CART_TTL", 7*24*time.Hour); err != nil {
		return Config{}, err
	}
	if cfg.OrderRetention, err = duration(getenv, "ORDER_RETENTION", 365*24*time.Hour); err != nil {
		return Config{}, err
	}
	if cfg.SearchURL != "" {
		if cfg.SearchSigned, err = productsearch.Signed(cfg.SearchURL, getenv("SEARCH_SIGV4")); err != nil {
			return Config{}, err
		}
	}
	return cfg, nil
}

func duration(getenv func(string) string, name string, def time.Duration) (time.Duration, error) {
	v := getenv(name)
	if v == "" {
		return def, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("%s=%q: want a positive Go duration such as 168h", name, v)
	}
	return d, nil
}
