package httpapi_test

import (
	"testing"
	"time"

	"github.com/shopstream/shopstream/functions/api/httpapi"
	"github.com/shopstream/shopstream/shared/tables"
)

func TestConfigFromEnv(t *testing.T) {
	base := func() map[string]string {
		env := map[string]string{"CURSOR_SECRET": "0123456789abcdef"}
		for _, tb := range tables.All() {
			env[tb.EnvVar] = "shop-" + tb.Name
		}
		return env
	}
	tests := []struct {
		name   string
		change map[string]string
		ok     bool
		check  func(httpapi.Config) string
	}{
		{"defaults", nil, true, func(c httpapi.Config) string {
			if c.CartTTL != 168*time.Hour || c.OrderRetention != 8760*time.Hour || c.SearchURL != "" || c.SearchSigned {
				return "want 168h carts, 8760h orders, no search"
			}
			return ""
		}},
		{"local search is not signed", map[string]string{"SEARCH_URL": "http://127.0.0.1:9200"}, true, func(c httpapi.Config) string {
			if c.SearchSigned {
				return "want unsigned"
			}
			return ""
		}},
		{"AWS search is signed", map[string]string{"SEARCH_URL": "https://search-shop-x.eu-west-1.es.amazonaws.com"}, true, func(c httpapi.Config) string {
			if !c.SearchSigned {
				return "want signed"
			}
			return ""
		}},
		{"signing forced", map[string]string{"SEARCH_URL": "https://search.example.com", "SEARCH_SIGV4": "true"}, true, func(c httpapi.Config) string {
			if !c.SearchSigned {
				return "want signed"
			}
			return ""
		}},
		{"a table unset", map[string]string{"ORDERS_TABLE": ""}, false, nil},
		{"short cursor secret", map[string]string{"CURSOR_SECRET": "short"}, false, nil},
		{"bad duration", map[string]string{"CART_TTL": "a week"}, false, nil},
		{"negative duration", map[string]string{"ORDER_RETENTION": "-1h"}, false, nil},
		{"search URL without scheme", map[string]string{"SEARCH_URL": "search:9200"}, false, nil},
		{"bad signing flag", map[string]string{"SEARCH_URL": "http://127.0.0.1:9200", "SEARCH_SIGV4": "sometimes"}, false, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := base()
			for k, v := range tt.change {
				env[k] = v
			}
			cfg, err := httpapi.ConfigFromEnv(func(k string) string { return env[k] })
			if (err == nil) != tt.ok {
				t.Fatalf("got error %v, want ok %v", err, tt.ok)
			}
			if tt.check != nil {
				if msg := tt.check(cfg); msg != "" {
					t.Errorf("got %+v: %s", cfg, msg)
				}
			}
		})
	}
}
