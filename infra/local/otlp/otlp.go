// Package otlp is the local stack's trace receiver: OTLP/HTTP (POST
// /v1/traces, protobuf or JSON, gzip or not, as OpenTelemetry's exporters
// send) into an in-memory store, kept in a JSON-lines file under DATA_DIR
// when one is set. GET /_local/trace?item=<id> answers the spans of an
// item's trace, with the stream batches that link to it and their children,
// for `make trace`.
package otlp

import (
	"bufio"
	"compress/gzip"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// Span is one received span, in the form `make trace` reads.
type Span struct {
	TraceID  string         `json:"traceId"`
	SpanID   string         `json:"spanId"`
	ParentID string         `json:"parentSpanId,omitempty"`
	Service  string         `json:"service"`
	Name     string         `json:"name"`
	Kind     string         `json:"kind"`
	Start    time.Time      `json:"start"`
	End      time.Time      `json:"end"`
	Error    string         `json:"error,omitempty"` // the status message of a span that failed
	Failed   bool           `json:"failed,omitempty"`
	Attrs    map[string]any `json:"attributes,omitempty"`
	Links    []Link         `json:"links,omitempty"`
}

// Link is a span's link to another trace's span.
type Link struct {
	TraceID string         `json:"traceId"`
	SpanID  string         `json:"spanId"`
	Attrs   map[string]any `json:"attributes,omitempty"`
}

// Duration is the span's length.
func (s Span) Duration() time.Duration { return s.End.Sub(s.Start) }

// MaxSpans bounds the store: the oldest spans go first.
const MaxSpans = 200_000

// Receiver receives spans and answers them back.
type Receiver struct {
	mu    sync.Mutex
	spans []Span
	file  *os.File
}

// New returns a Receiver; with dir set, it keeps the spans in
// dir/spans.jsonl and reads back those an earlier run left.
func New(dir string) (*Receiver, error) {
	r := &Receiver{}
	if dir == "" {
		return r, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	path := filepath.Join(dir, "spans.jsonl")
	if f, err := os.Open(path); err == nil {
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 16<<20)
		for sc.Scan() {
			var s Span
			if json.Unmarshal(sc.Bytes(), &s) == nil {
				r.spans = append(r.spans, s)
			}
		}
		f.Close()
		r.trim()
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, err
	}
	r.file = f
	return r, nil
}

// Close closes the file of a kept store.
func (r *Receiver) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.file == nil {
		return nil
	}
	err := r.file.Close()
	r.file = nil
	return err
}

func (r *Receiver) trim() {
	if n := len(r.spans) - MaxSpans; n > 0 {
		r.spans = slices.Delete(r.spans, 0, n)
	}
}

// Handler serves POST /v1/traces and GET /_local/trace.
func (r *Receiver) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/traces", r.export)
	mux.HandleFunc("GET /_local/trace", r.query)
	mux.HandleFunc("GET /_local/freshness", r.freshness)
	return mux
}

// export decodes one OTLP/HTTP request, protobuf or JSON.
func (r *Receiver) export(w http.ResponseWriter, req *http.Request) {
	var body io.Reader = http.MaxBytesReader(w, req.Body, 64<<20)
	if req.Header.Get("Content-Encoding") == "gzip" {
		gz, err := gzip.NewReader(body)
		if err != nil {
			http.Error(w, "bad gzip body", http.StatusBadRequest)
			return
		}
		defer gz.Close()
		body = gz
	}
	raw, err := io.ReadAll(body)
	if err != nil {
		http.Error(w, "read body", http.StatusBadRequest)
		return
	}
	ct, _, _ := mime.ParseMediaType(req.Header.Get("Content-Type"))
	var msg collectortrace.ExportTraceServiceRequest
	isJSON := ct == "application/json"
	switch {
	case isJSON:
		err = protojson.UnmarshalOptions{DiscardUnknown: true}.Unmarshal(raw, &msg)
	case ct == "application/x-protobuf" || ct == "application/protobuf" || ct == "":
		err = proto.Unmarshal(raw, &msg)
	default:
		http.Error(w, "unsupported content type "+ct+": send application/x-protobuf or application/json", http.StatusUnsupportedMediaType)
		return
	}
	if err != nil {
		http.Error(w, "decode: "+err.Error(), http.StatusBadRequest)
		return
	}
	r.add(Decode(&msg))
	resp := &collectortrace.ExportTraceServiceResponse{}
	var out []byte
	if isJSON {
		out, _ = protojson.Marshal(resp)
		w.Header().Set("Content-Type", "application/json")
	} else {
		out, _ = proto.Marshal(resp)
		w.Header().Set("Content-Type", "application/x-protobuf")
	}
	_, _ = w.Write(out)
}

func (r *Receiver) add(spans []Span) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.spans = append(r.spans, spans...)
	r.trim()
	if r.file == nil {
		return
	}
	bw := bufio.NewWriter(r.file)
	enc := json.NewEncoder(bw)
	for _, s := range spans {
		_ = enc.Encode(s)
	}
	_ = bw.Flush()
}

// Spans returns a copy of every span held.
func (r *Receiver) Spans() []Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.spans)
}

// Decode turns an OTLP request into spans.
func Decode(msg *collectortrace.ExportTraceServiceRequest) []Span {
	var out []Span
	for _, rs := range msg.GetResourceSpans() {
		service := ""
		for _, kv := range rs.GetResource().GetAttributes() {
			if kv.GetKey() == "service.name" {
				service = kv.GetValue().GetStringValue()
			}
		}
		for _, ss := range rs.GetScopeSpans() {
			for _, sp := range ss.GetSpans() {
				s := Span{
					TraceID:  hex.EncodeToString(sp.GetTraceId()),
					SpanID:   hex.EncodeToString(sp.GetSpanId()),
					ParentID: hex.EncodeToString(sp.GetParentSpanId()),
					Service:  service,
					Name:     sp.GetName(),
					Kind:     kindName(sp.GetKind()),
					Start:    time.Unix(0, int64(sp.GetStartTimeUnixNano())).UTC(),
					End:      time.Unix(0, int64(sp.GetEndTimeUnixNano())).UTC(),
					Attrs:    attrs(sp.GetAttributes()),
				}
				if sp.GetStatus().GetCode() == tracepb.Status_STATUS_CODE_ERROR {
					s.Failed, s.Error = true, sp.GetStatus().GetMessage()
				}
				for _, l := range sp.GetLinks() {
					s.Links = append(s.Links, Link{TraceID: hex.EncodeToString(l.GetTraceId()), SpanID: hex.EncodeToString(l.GetSpanId()), Attrs: attrs(l.GetAttributes())})
				}
				out = append(out, s)
			}
		}
	}
	return out
}

func kindName(k tracepb.Span_SpanKind) string {
	switch k {
	case tracepb.Span_SPAN_KIND_SERVER:
		return "server"
	case tracepb.Span_SPAN_KIND_CLIENT:
		return "client"
	case tracepb.Span_SPAN_KIND_CONSUMER:
		return "consumer"
	case tracepb.Span_SPAN_KIND_PRODUCER:
		return "producer"
	}
	return "internal"
}

func attrs(kvs []*commonpb.KeyValue) map[string]any {
	if len(kvs) == 0 {
		return nil
	}
	m := make(map[string]any, len(kvs))
	for _, kv := range kvs {
		m[kv.GetKey()] = value(kv.GetValue())
	}
	return m
}

func value(v *commonpb.AnyValue) any {
	switch x := v.GetValue().(type) {
	case *commonpb.AnyValue_StringValue:
		return x.StringValue
	case *commonpb.AnyValue_IntValue:
		return float64(x.IntValue) // as JSON reads it back
	case *commonpb.AnyValue_DoubleValue:
		return x.DoubleValue
	case *commonpb.AnyValue_BoolValue:
		return x.BoolValue
	case *commonpb.AnyValue_ArrayValue:
		var out []any
		for _, e := range x.ArrayValue.GetValues() {
			out = append(out, value(e))
		}
		return out
	}
	return nil
}

// ErrNoTrace is returned by Find for an item no span names.
var ErrNoTrace = errors.New("no trace names this item")

// Found is an item's trace: the spans of the traces that wrote it, the
// stream batches that link to them and those batches' own spans.
type Found struct {
	Item string `json:"item"`
	// Writers are the trace ids of the writes of the item, oldest first.
	Writers []string `json:"writers"`
	Spans   []Span   `json:"spans"`
}

// Find gathers the spans of the item id (an orderId, a productId, a
// productId/<user hash>; see tracing.ItemID).
func (r *Receiver) Find(item string) (Found, error) {
	spans := r.Spans()
	writers := map[string]bool{}
	batches := map[string]bool{} // trace ids of the batches that processed it
	for _, s := range spans {
		if names(s.Attrs["shopstream.items"], item) {
			writers[s.TraceID] = true
		}
		for _, l := range s.Links {
			if l.Attrs["shopstream.item"] == item {
				writers[l.TraceID] = true
				batches[s.TraceID] = true
			}
		}
	}
	if len(writers) == 0 && len(batches) == 0 {
		return Found{}, fmt.Errorf("%w: %s", ErrNoTrace, item)
	}
	f := Found{Item: item}
	first := map[string]time.Time{}
	for _, s := range spans {
		if writers[s.TraceID] || batches[s.TraceID] {
			f.Spans = append(f.Spans, s)
		}
		if writers[s.TraceID] && (first[s.TraceID].IsZero() || s.Start.Before(first[s.TraceID])) {
			first[s.TraceID] = s.Start
		}
	}
	for id := range writers {
		f.Writers = append(f.Writers, id)
	}
	slices.SortFunc(f.Writers, func(a, b string) int { return first[a].Compare(first[b]) })
	slices.SortStableFunc(f.Spans, func(a, b Span) int { return a.Start.Compare(b.Start) })
	return f, nil
}

func names(v any, item string) bool {
	list, ok := v.([]any)
	if !ok {
		return false
	}
	for _, e := range list {
		if e == item {
			return true
		}
	}
	return false
}

func (r *Receiver) query(w http.ResponseWriter, req *http.Request) {
	item := req.URL.Query().Get("item")
	if item == "" {
		http.Error(w, "want ?item=<order, review or product id>", http.StatusBadRequest)
		return
	}
	f, err := r.Find(item)
	if errors.Is(err, ErrNoTrace) {
		http.Error(w, err.Error(), http.StatusNotFound)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(f)
}

// Freshness is the age of the records each processor handled (now minus the
// record's creation time, from its batch's links and spans).
type Freshness struct {
	Function string  `json:"function"`
	Records  int     `json:"records"`
	P50Ms    float64 `json:"p50Ms"`
	P99Ms    float64 `json:"p99Ms"`
	MaxMs    float64 `json:"maxMs"`
}

// Freshness sums up every batch span held, per function.
func (r *Receiver) Freshness() []Freshness {
	ages := map[string][]float64{}
	for _, s := range r.Spans() {
		fn, _ := s.Attrs["faas.name"].(string)
		if fn == "" || s.Kind != "consumer" {
			continue
		}
		for _, l := range s.Links {
			if a, ok := l.Attrs["shopstream.age_ms"].(float64); ok {
				ages[fn] = append(ages[fn], a)
			}
		}
	}
	var out []Freshness
	for fn, as := range ages {
		slices.Sort(as)
		out = append(out, Freshness{Function: fn, Records: len(as), P50Ms: rank(as, 0.5), P99Ms: rank(as, 0.99), MaxMs: as[len(as)-1]})
	}
	slices.SortFunc(out, func(a, b Freshness) int {
		if a.Function < b.Function {
			return -1
		}
		return 1
	})
	return out
}

func rank(sorted []float64, p float64) float64 {
	i := int(float64(len(sorted))*p+0.999999) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

func (r *Receiver) freshness(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(r.Freshness())
}
