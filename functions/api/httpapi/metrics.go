package httpapi

import (
	"context"
	"encoding/json"
	"time"

	"github.com/shopstream/shopstream/functions/api/store"
)

// Namespace is the CloudWatch namespace of the API's metrics.
const Namespace = "shopstream/api"

type emfMetric struct {
	Name string `json:"Name"`
	Unit string `json:"Unit,omitempty"`
}

type emfDirective struct {
	Namespace  string      `json:"Namespace"`
	Dimensions [][]string  `json:"Dimensions"`
	Metrics    []emfMetric `json:"Metrics"`
}

// observe logs the request and writes its metrics as one CloudWatch Embedded
// Metric Format line: requests, latency and DynamoDB use per route; errors per
// problem type; orders placed.
func (h *Handler) observe(ctx context.Context, route string, status int, problemType string, took time.Duration, u store.Usage) {
	if route == "" {
		route = "unmatched"
	}
	ms := float64(took.Microseconds()) / 1000
	h.deps.Logger.InfoContext(ctx, "request", "apiRequestId", requestID(ctx), "route", route, "status", status,
		"ms", ms, "dynamodbCalls", u.Calls, "readUnits", u.ReadUnits, "writeUnits", u.WriteUnits)

	directives := []emfDirective{{
		Namespace:  Namespace,
		Dimensions: [][]string{{"route"}},
		Metrics: []emfMetric{
			{"requests", "Count"}, {"latency", "Milliseconds"},
			{"dynamodbCalls", "Count"}, {"readUnits", "Count"}, {"writeUnits", "Count"},
		},
	}}
	rec := map[string]any{
		"route": route, "status": status, "apiRequestId": requestID(ctx),
		"requests": 1, "latency": ms, "dynamodbCalls": u.Calls, "readUnits": u.ReadUnits, "writeUnits": u.WriteUnits,
	}
	if problemType != "" {
		directives = append(directives, emfDirective{
			Namespace: Namespace, Dimensions: [][]string{{"problemType"}},
			Metrics: []emfMetric{{"errors", "Count"}},
		})
		rec["problemType"], rec["errors"] = problemType, 1
	}
	if placed, ok := ctx.Value(placedKey{}).(*bool); ok && *placed {
		directives = append(directives, emfDirective{
			Namespace: Namespace, Dimensions: [][]string{{}},
			Metrics: []emfMetric{{"ordersPlaced", "Count"}},
		})
		rec["ordersPlaced"] = 1
	}
	rec["_aws"] = map[string]any{"Timestamp": h.deps.Now().UnixMilli(), "CloudWatchMetrics": directives}
	line, err := json.Marshal(rec)
	if err != nil {
		return
	}
	h.metricsMu.Lock()
	defer h.metricsMu.Unlock()
	_, _ = h.deps.Metrics.Write(append(line, '\n'))
}

type placedKey struct{}

// placed marks the request as having placed an order.
func (h *Handler) placed(ctx context.Context) {
	if p, ok := ctx.Value(placedKey{}).(*bool); ok {
		*p = true
	}
}
