package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/opensearch-project/opensearch-go/v4/opensearchapi"
)

// TestSearchClientSignsOnlyWhenAsked sends one request through the client and
// looks at what reached the server.
func TestSearchClientSignsOnlyWhenAsked(t *testing.T) {
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "secret")
	t.Setenv("AWS_REGION", "us-east-1")
	var mu sync.Mutex
	var auth string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		auth = r.Header.Get("Authorization")
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"acknowledged":true,"index":"products","shards_acknowledged":true}`))
	}))
	defer srv.Close()
	tests := []struct {
		name   string
		sigv4  string
		signed bool
	}{
		{"local endpoint, unset", "", false},
		{"explicitly on", "true", true},
		{"explicitly off", "false", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := map[string]string{"SEARCH_URL": srv.URL, "SEARCH_SIGV4": tt.sigv4}
			awsCfg, err := config.LoadDefaultConfig(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			c, err := searchClient(func(k string) string { return env[k] }, awsCfg, nil)
			if err != nil {
				t.Fatalf("searchClient: %v", err)
			}
			if _, err := c.Indices.Exists(context.Background(), opensearchapi.IndicesExistsReq{Indices: []string{"products"}}); err != nil {
				t.Fatalf("request: %v", err)
			}
			mu.Lock()
			got := strings.HasPrefix(auth, "AWS4-HMAC-SHA256 ")
			mu.Unlock()
			if got != tt.signed {
				t.Errorf("signed: got %v, want %v (Authorization %q)", got, tt.signed, auth)
			}
		})
	}
}

func TestSearchClientConfig(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		ok   bool
	}{
		{"no endpoint", map[string]string{}, false},
		{"not a url", map[string]string{"SEARCH_URL": "search"}, false},
		{"bad flag", map[string]string{"SEARCH_URL": "http://127.0.0.1:9200", "SEARCH_SIGV4": "maybe"}, false},
		{"local", map[string]string{"SEARCH_URL": "http://127.0.0.1:9200"}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := searchClient(func(k string) string { return tt.env[k] }, aws.Config{}, nil)
			if got := err == nil; got != tt.ok {
				t.Errorf("ok: got %v (err %v), want %v", got, err, tt.ok)
			}
		})
	}
}
