package ddbfront

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// seq is sequence number n as DynamoDB Local writes it, 21 digits.
func seq(n int) string { return fmt.Sprintf("%021d", n) }

// writeStampLines writes a stream-stamps.jsonl as a front would have left it.
func writeStampLines(t *testing.T, dir string, lines ...stampLine) {
	t.Helper()
	var b strings.Builder
	for _, l := range lines {
		raw, err := json.Marshal(l)
		if err != nil {
			t.Fatal(err)
		}
		b.Write(raw)
		b.WriteByte('\n')
	}
	if err := os.WriteFile(filepath.Join(dir, "stream-stamps.jsonl"), []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}

type lookup struct {
	Seq     string
	Sec     int64
	Covered bool
}

func lookups(sh *shardPos, seqs ...string) []lookup {
	var out []lookup
	for _, s := range seqs {
		sec, covered := sh.stampOf(s)
		out = append(out, lookup{s, sec, covered})
	}
	return out
}

func TestStampLogReplay(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	sec := now.Unix()
	const arn, shard = "arn:aws:dynamodb:ddblocal:000000000000:table/t/stream/2027-01-15T08:00:00.000", "shardId-1"
	tests := []struct {
		name  string
		lines []stampLine
		want  []lookup
	}{
		{
			name: "a front that stopped cleanly",
			lines: []stampLine{
				{Stream: arn, Shard: shard, Seq: seq(1), Sec: unknown, At: sec - 10},
				{Stream: arn, Shard: shard, Seq: seq(3), Sec: sec - 5, At: sec - 5},
				{Stream: arn, Shard: shard, Seq: seq(6), Sec: sec - 4, At: sec - 4},
				{Stream: arn, Shard: shard, Through: seq(8)},
			},
			want: []lookup{
				{seq(2), unknown, true}, {seq(3), sec - 5, true}, {seq(5), sec - 5, true},
				{seq(6), sec - 4, true}, {seq(8), sec - 4, true}, {seq(9), unknown, false},
			},
		},
		{
			// Records after the last boundary may have been written and not yet read.
			name: "a front that crashed",
			lines: []stampLine{
				{Stream: arn, Shard: shard, Seq: seq(3), Sec: sec - 5, At: sec - 5},
				{Stream: arn, Shard: shard, Through: seq(4)},
				{Stream: arn, Shard: shard, Seq: seq(6), Sec: sec - 4, At: sec - 4},
				{Stream: arn, Shard: shard, Seq: seq(7), Sec: sec - 3, At: sec - 3},
			},
			want: []lookup{
				{seq(5), sec - 5, true}, {seq(6), sec - 4, true}, {seq(7), unknown, true}, {seq(8), unknown, false},
			},
		},
		{
			name: "boundaries past the stream's retention",
			lines: []stampLine{
				{Stream: arn, Shard: shard, Seq: seq(1), Sec: sec - 30*3600, At: sec - 30*3600},
				{Stream: arn, Shard: shard, Seq: seq(2), Sec: sec - 26*3600, At: sec - 26*3600},
				{Stream: arn, Shard: shard, Seq: seq(3), Sec: sec - 3600, At: sec - 3600},
				{Stream: arn, Shard: shard, Through: seq(4)},
			},
			want: []lookup{{seq(1), unknown, true}, {seq(2), sec - 26*3600, true}, {seq(4), sec - 3600, true}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			writeStampLines(t, dir, tt.lines...)
			for round := 0; round < 2; round++ { // the compacted file reads the same
				l, loaded, err := openStampLog(dir, now)
				if err != nil {
					t.Fatalf("open: %v", err)
				}
				sh := loaded[arn][shard]
				if sh == nil {
					t.Fatalf("round %d: shard not loaded", round)
				}
				var seqs []string
				for _, w := range tt.want {
					seqs = append(seqs, w.Seq)
				}
				if diff := cmp.Diff(tt.want, lookups(sh, seqs...)); diff != "" {
					t.Errorf("round %d: lookups (-want +got):\n%s", round, diff)
				}
				if err := l.close(nil); err != nil {
					t.Fatalf("close: %v", err)
				}
			}
		})
	}
}

func TestNoteAppendsABoundaryPerSecond(t *testing.T) {
	sh := &shardPos{}
	const t0 = 1_800_000_000
	// Seen by a first pass (unknown), then by passes at t0, t0, t0+1, t0+3.
	for i, at := range []int64{t0, t0, t0, t0, t0 + 1, t0 + 3} {
		sec := at
		if i < 2 {
			sec = unknown
		}
		sh.note(seq(i+1), sec, at)
	}
	opt := cmp.AllowUnexported(boundary{})
	want := []boundary{{seq(1), unknown, t0}, {seq(3), t0, t0}, {seq(5), t0 + 1, t0 + 1}, {seq(6), t0 + 3, t0 + 3}}
	if diff := cmp.Diff(want, sh.stamps, opt); diff != "" {
		t.Errorf("boundaries (-want +got):\n%s", diff)
	}
	// 26 hours later, the boundaries whose ranges ended more than 25 hours
	// ago are gone; the one whose range the new boundary ends stays.
	later := int64(t0 + 26*3600)
	sh.note(seq(7), later, later)
	want = []boundary{{seq(6), t0 + 3, t0 + 3}, {seq(7), later, later}}
	if diff := cmp.Diff(want, sh.stamps, opt); diff != "" {
		t.Errorf("boundaries after 26 h (-want +got):\n%s", diff)
	}
}

func TestStatementTable(t *testing.T) {
	tests := []struct{ stmt, want string }{
		{`INSERT INTO "orders" VALUE {'pk': 'a'}`, "orders"},
		{`insert into orders value {'pk': 'a'}`, "orders"},
		{`  UPDATE "t1-2-stamps" SET v = 2 WHERE pk = 'a'`, "t1-2-stamps"},
		{`UPDATE plain_name SET v = 2`, "plain_name"},
		{`DELETE FROM "we""ird" WHERE pk = 'a'`, `we"ird`},
		{`DELETE FROM"x"WHERE pk = 'a'`, "x"},
		{`SELECT * FROM "orders"`, ""},
		{`EXISTS(SELECT * FROM "orders" WHERE pk = 'a')`, ""},
		{`INSERT "orders" VALUE {}`, ""},
		{`UPDATE "unterminated SET v = 1`, ""},
		{``, ""},
	}
	for _, tt := range tests {
		if got := statementTable(tt.stmt); got != tt.want {
			t.Errorf("statementTable(%q): got %q, want %q", tt.stmt, got, tt.want)
		}
	}
}

func TestWrittenTables(t *testing.T) {
	tests := []struct {
		op, body string
		want     []string
	}{
		{"PutItem", `{"TableName":"a","Item":{}}`, []string{"a"}},
		{"BatchWriteItem", `{"RequestItems":{"b":[],"a":[]}}`, []string{"a", "b"}},
		{"TransactWriteItems", `{"TransactItems":[{"Put":{"TableName":"a"}},{"Update":{"TableName":"b"}},{"Delete":{"TableName":"a"}}]}`, []string{"a", "b"}},
		{"ExecuteStatement", `{"Statement":"UPDATE \"a\" SET v = 1"}`, []string{"a"}},
		{"ExecuteStatement", `{"Statement":"SELECT * FROM \"a\""}`, nil},
		{"BatchExecuteStatement", `{"Statements":[{"Statement":"DELETE FROM \"b\" WHERE pk = 'x'"},{"Statement":"SELECT * FROM \"c\""}]}`, []string{"b"}},
		{"ExecuteTransaction", `{"TransactStatements":[{"Statement":"INSERT INTO \"c\" VALUE {}"},{"Statement":"UPDATE \"a\" SET v = 1"}]}`, []string{"a", "c"}},
	}
	for _, tt := range tests {
		if diff := cmp.Diff(tt.want, writtenTables(tt.op, []byte(tt.body))); diff != "" {
			t.Errorf("%s %s (-want +got):\n%s", tt.op, tt.body, diff)
		}
	}
}

func TestShardOfIterator(t *testing.T) {
	// As DynamoDB Local 3.3.1 hands them out.
	it := "arn:aws:dynamodb:ddblocal:000000000000:table/t17146-1-probe/stream/2026-11-23T16:47:29.703|001|" +
		"c2hhcmRJZC0wMDAwMDAwMTc5NTQ1MjQ0OTc0OS1iNzdkNjVmZHwwMDAwMDAwMDAwMDAwMDAwMDAwMDF8MDAwMDAwMDAwMDAwMDAwMDAxNzk1NDUyNDUwMzc4"
	if got, want := shardOfIterator(it), "shardId-00000001795452449749-b77d65fd"; got != want {
		t.Errorf("shard: got %q, want %q", got, want)
	}
	if got := shardOfIterator("not an iterator"); got != "" {
		t.Errorf("shard of a foreign iterator: got %q, want none", got)
	}
}

func TestRestamp(t *testing.T) {
	const sec = 1795452447 // 16:47:27; its minute is 1795452420
	tests := []struct {
		local  string
		want   string
		wantOK bool
	}{
		{"1795452420.000", "1795452447.000", true},
		{"1795452420", "1795452447.000", true},
		{"1795452360.000", "", false}, // another minute
		{"1795452420.500", "", false},
		{`"1795452420"`, "", false},
	}
	for _, tt := range tests {
		got, ok := restamp(json.RawMessage(tt.local), sec)
		if string(got) != tt.want || ok != tt.wantOK {
			t.Errorf("restamp(%s): got %s, %v; want %s, %v", tt.local, got, ok, tt.want, tt.wantOK)
		}
	}
	// A write across a minute's end: DynamoDB Local stamped it in the last
	// second of a minute, the front saw it answered in the first of the
	// next. It was written in that last second.
	const next = 1795452480 // 16:48:00
	if got, ok := restamp(json.RawMessage("1795452420.000"), next); !ok || string(got) != "1795452479.000" {
		t.Errorf("restamp across a minute's end: got %s, %v; want 1795452479.000 (16:47:59)", got, ok)
	}
	if got, ok := restamp(json.RawMessage("1795452480.000"), next-1); !ok || string(got) != "1795452480.000" {
		t.Errorf("restamp across a minute's end the other way: got %s, %v; want 1795452480.000 (16:48:00)", got, ok)
	}
	if _, ok := restamp(json.RawMessage("1795452360.000"), next); ok {
		t.Error("restamp two minutes apart: taken, want DynamoDB Local's minute kept")
	}
}
