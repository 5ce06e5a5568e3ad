package main

import (
	"context"
	"strings"
	"testing"
)

// TestRunRefusesIncompleteConfig: a missing setting stops the function at
// start, naming the setting, before any record is read.
func TestRunRefusesIncompleteConfig(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		want string
	}{
		{"no bucket", map[string]string{"ORDERS_TABLE": "o", "CARTS_TABLE": "c"}, "ARCHIVE_BUCKET"},
		{"no orders table", map[string]string{"ARCHIVE_BUCKET": "b", "CARTS_TABLE": "c"}, "ORDERS_TABLE"},
		{"no carts table", map[string]string{"ARCHIVE_BUCKET": "b", "ORDERS_TABLE": "o"}, "CARTS_TABLE"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := run(context.Background(), func(k string) string { return tt.env[k] })
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("got %v, want an error naming %s", err, tt.want)
			}
		})
	}
}
