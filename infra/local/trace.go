package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/shopstream/shopstream/infra/local/otlp"
	"github.com/shopstream/shopstream/shared/tracing"
)

// traceCommand prints an item's trace from the running stack's receiver
// (`make trace ID=…`).
func traceCommand(args []string, getenv func(string) string, out io.Writer) error {
	fs := flag.NewFlagSet("trace", flag.ContinueOnError)
	id := fs.String("id", "", "an order id, a product id, or a review as <productId>/<userId>")
	endpoint := fs.String("endpoint", "", "the stack's OTLP endpoint (default http://127.0.0.1:$OTLP_PORT, 4318)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *id == "" {
		return fmt.Errorf("-id is required (make trace ID=<order, review or product id>)")
	}
	if *endpoint == "" {
		*endpoint = "http://" + addr(4318)
		if p := getenv("OTLP_PORT"); p != "" {
			n, err := strconv.Atoi(p)
			if err != nil {
				return fmt.Errorf("OTLP_PORT=%q: want a port number", p)
			}
			*endpoint = "http://" + addr(n)
		}
	}
	item := *id
	if product, user, ok := strings.Cut(item, "/"); ok {
		item = tracing.ReviewID(product, user) // spans name users by their hash
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var found otlp.Found
	if err := getJSON(ctx, *endpoint+"/_local/trace?item="+url.QueryEscape(item), &found); err != nil {
		return err
	}
	var fresh []otlp.Freshness
	if err := getJSON(ctx, *endpoint+"/_local/freshness", &fresh); err != nil {
		return err
	}
	printTrace(out, *id, found, fresh)
	return nil
}

func getJSON(ctx context.Context, u string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("no local stack's trace receiver at %s (make run; OTLP_PORT): %w", u, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusNotFound {
		msg, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("%s (spans reach the receiver within a second of the request; with OTEL_EXPORTER_OTLP_ENDPOINT set, they went to that tool instead)", strings.TrimSpace(string(msg)))
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", u, resp.Status)
	}
	return json.NewDecoder(resp.Body).Decode(v)
}

// printTrace prints the item's spans as a tree: each trace that wrote the
// item from its root, each stream batch that processed a write under the
// span it links to, after its stream wait (the batch's start minus the
// write's end); then a summary.
func printTrace(out io.Writer, id string, f otlp.Found, fresh []otlp.Freshness) {
	byID := map[string]otlp.Span{}
	for _, s := range f.Spans {
		byID[s.SpanID] = s
	}
	children := map[string][]otlp.Span{}
	linked := map[string]otlp.Link{} // batch span id -> its link for this item
	var roots []otlp.Span
	for _, s := range f.Spans {
		if _, ok := byID[s.ParentID]; ok && s.ParentID != "" {
			children[s.ParentID] = append(children[s.ParentID], s)
			continue
		}
		if l, ok := itemLink(s, f.Item); ok {
			if _, ok := byID[l.SpanID]; ok {
				children[l.SpanID] = append(children[l.SpanID], s)
				linked[s.SpanID] = l
				continue
			}
		}
		roots = append(roots, s)
	}
	var waits []time.Duration
	var ages []float64
	services := map[string]bool{}
	failed := 0
	var walk func(s otlp.Span, prefix string, last bool, depth int)
	walk = func(s otlp.Span, prefix string, last bool, depth int) {
		services[s.Service] = true
		if s.Failed {
			failed++
		}
		branch, next := "", ""
		if depth > 0 {
			branch, next = "├─ ", "│  "
			if last {
				branch, next = "└─ ", "   "
			}
		}
		if l, ok := linked[s.SpanID]; ok {
			w := s.Start.Sub(byID[l.SpanID].End)
			waits = append(waits, w)
			age, _ := l.Attrs[tracing.AttrAgeMs].(float64)
			ages = append(ages, age)
			fmt.Fprintf(out, "%s%s⇢ stream wait %s (record age %s, %v)\n", prefix, branch, round(w), round(time.Duration(age)*time.Millisecond), l.Attrs[tracing.AttrEvent])
			prefix += next
			branch, next = "└─ ", "   "
		}
		fmt.Fprintf(out, "%s%s%s\n", prefix, branch, describe(s))
		kids := children[s.SpanID]
		slices.SortStableFunc(kids, func(a, b otlp.Span) int { return a.Start.Compare(b.Start) })
		for i, c := range kids {
			walk(c, prefix+next, i == len(kids)-1, depth+1)
		}
	}
	fmt.Fprintf(out, "%s: %d spans in %d traces\n", id, len(f.Spans), len(f.Writers))
	for _, r := range roots {
		fmt.Fprintf(out, "trace %s\n", r.TraceID)
		walk(r, "", true, 0)
	}
	var names []string
	for s := range services {
		names = append(names, s)
	}
	slices.Sort(names)
	fmt.Fprintf(out, "\nsummary: functions %s; %d spans, %d failed\n", strings.Join(names, ", "), len(f.Spans), failed)
	if len(waits) > 0 {
		slices.Sort(waits)
		fmt.Fprintf(out, "stream wait (write end to batch start): min %s, max %s over %d batches\n", round(waits[0]), round(waits[len(waits)-1]), len(waits))
	}
	for _, fr := range fresh {
		fmt.Fprintf(out, "freshness %s: p50 %s, p99 %s, max %s over %d records (now minus ApproximateCreationDateTime, whole seconds on AWS)\n",
			fr.Function, ms(fr.P50Ms), ms(fr.P99Ms), ms(fr.MaxMs), fr.Records)
	}
}

// itemLink is a batch span's link to a write of item.
func itemLink(s otlp.Span, item string) (otlp.Link, bool) {
	for _, l := range s.Links {
		if l.Attrs[tracing.AttrItem] == item {
			return l, true
		}
	}
	return otlp.Link{}, false
}

// describe is one span's line: who, what, how long, how it ended and, for a
// DynamoDB call, its tables, units and retries.
func describe(s otlp.Span) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s  %s  %s", s.Service, s.Name, round(s.Duration()))
	outcome, _ := s.Attrs[tracing.AttrOutcome].(string)
	if st, ok := s.Attrs[tracing.AttrStatus].(float64); ok {
		fmt.Fprintf(&b, "  %d", int(st))
	}
	switch {
	case outcome != "":
		fmt.Fprintf(&b, "  %s", outcome)
	case s.Failed:
		b.WriteString("  error")
	default:
		b.WriteString("  ok")
	}
	if t, ok := s.Attrs[tracing.AttrTables].([]any); ok {
		var names []string
		for _, n := range t {
			names = append(names, fmt.Sprint(n))
		}
		fmt.Fprintf(&b, "  tables %s", strings.Join(names, ","))
	}
	if u, ok := s.Attrs[tracing.AttrUnits].(float64); ok {
		fmt.Fprintf(&b, "  %g units", u)
	}
	if r, ok := s.Attrs[tracing.AttrRetries].(float64); ok && r > 0 {
		fmt.Fprintf(&b, "  retries %d", int(r))
	}
	if r, ok := s.Attrs[tracing.AttrThrottle].(float64); ok && r > 0 {
		fmt.Fprintf(&b, "  throttled %d", int(r))
	}
	if n, ok := s.Attrs[tracing.AttrRecords].(float64); ok {
		fmt.Fprintf(&b, "  %d records", int(n))
	}
	if n, ok := s.Attrs[tracing.AttrFailures].(float64); ok && n > 0 {
		fmt.Fprintf(&b, "  %d failed", int(n))
	}
	if s.Error != "" {
		fmt.Fprintf(&b, "  (%s)", s.Error)
	}
	return b.String()
}

func round(d time.Duration) string {
	switch {
	case d >= time.Second:
		return d.Round(10 * time.Millisecond).String()
	case d >= time.Millisecond:
		return d.Round(10 * time.Microsecond).String()
	}
	return d.Round(time.Microsecond).String()
}

func ms(v float64) string { return round(time.Duration(v * float64(time.Millisecond))) }
