package wiring

import (
	"strings"
	"testing"
	"time"
)

func TestMappingsAreValid(t *testing.T) {
	if err := Validate(Mappings()); err != nil {
		t.Fatalf("got %v, want nil", err)
	}
}

func TestValidateRejects(t *testing.T) {
	third := Mappings()[0]
	third.Name = "orders-third"
	tests := []struct {
		name   string
		mutate func([]Mapping) []Mapping
		want   string
	}{
		{"third consumer", func(ms []Mapping) []Mapping { return append(ms, third) }, "consumers"},
		{"unknown table", func(ms []Mapping) []Mapping { ms[0].Table = "nope"; return ms }, "not defined"},
		{"table without stream", func(ms []Mapping) []Mapping { ms[0].Table = "users"; return ms }, "no stream"},
		{"batch size", func(ms []Mapping) []Mapping { ms[0].BatchSize = 0; return ms }, "batch size"},
		{"duplicate name", func(ms []Mapping) []Mapping { ms[1].Name = ms[0].Name; return ms }, "duplicate"},
		{"window in part seconds", func(ms []Mapping) []Mapping { ms[0].BatchingWindow = 500 * time.Millisecond; return ms }, "whole seconds"},
		{"parallelization factor", func(ms []Mapping) []Mapping { ms[0].ParallelizationFactor = 11; return ms }, "parallelization factor"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Validate(tt.mutate(Mappings()))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v, want error containing %q", err, tt.want)
			}
		})
	}
}
