package stack_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/shopstream/shopstream/infra/cdk/stack"
	"github.com/shopstream/shopstream/shared/tables"
)

// TestArchiveCatalog: a Glue database and, per archived table, a table over
// the archive bucket's prefix with the line's columns, the JSON SerDe, gzip,
// and partition projection on year/month/day whose location template names
// exactly the objects the archiver writes (its golden samples).
func TestArchiveCatalog(t *testing.T) {
	s := stages[stack.Dev]
	cfg, _ := stack.StageConfig(stack.Dev)
	dbs := s.resources("AWS::Glue::Database")
	if len(dbs) != 1 {
		t.Fatalf("got %d Glue databases, want 1", len(dbs))
	}
	for _, db := range dbs {
		if got := props(db)["DatabaseInput"].(map[string]any)["Name"]; got != stack.ArchiveDatabase(cfg) {
			t.Errorf("database %v, want %s", got, stack.ArchiveDatabase(cfg))
		}
	}
	byName := map[string]map[string]any{}
	for _, tb := range s.resources("AWS::Glue::Table") {
		p := props(tb)
		if p["DatabaseName"] != stack.ArchiveDatabase(cfg) {
			t.Errorf("table in database %v", p["DatabaseName"])
		}
		in := p["TableInput"].(map[string]any)
		byName[in["Name"].(string)] = in
	}
	if got, want := len(byName), len(stack.ArchivedTables()); got != want {
		t.Errorf("got %d archive tables, want %d", got, want)
	}
	archiveID := s.logicalID(s.stack.Archive)
	templates := map[string]*regexp.Regexp{}
	for _, tn := range stack.ArchivedTables() {
		in, ok := byName[tn]
		if !ok {
			t.Errorf("no Glue table %s", tn)
			continue
		}
		params := in["Parameters"].(map[string]any)
		want := map[string]any{
			"classification":          "json",
			"compressionType":         "gzip",
			"projection.enabled":      "true",
			"projection.year.type":    "integer",
			"projection.year.range":   stack.ArchiveYears,
			"projection.month.type":   "integer",
			"projection.month.range":  "1,12",
			"projection.month.digits": "2",
			"projection.day.type":     "integer",
			"projection.day.range":    "1,31",
			"projection.day.digits":   "2",
		}
		got := map[string]any{}
		for k := range want {
			got[k] = params[k]
		}
		if d := cmp.Diff(want, got); d != "" {
			t.Errorf("%s: parameters (-want +got):\n%s", tn, d)
		}
		// The template joins the bucket's name with the literal path.
		tmpl := fmt.Sprint(params["storage.location.template"])
		if !slices.Contains(refs(params["storage.location.template"]), archiveID) {
			t.Errorf("%s: location template %s is not in the archive bucket", tn, tmpl)
		}
		_, path, _ := strings.Cut(tmpl, " /")
		path = strings.TrimSuffix(path, "]]]")
		pattern := "^" + strings.NewReplacer("${year}", `(\d{4})`, "${month}", `(\d{2})`, "${day}", `(\d{2})`).Replace(regexp.QuoteMeta(path))
		pattern = strings.NewReplacer(`\$\{year\}`, `\d{4}`, `\$\{month\}`, `\d{2}`, `\$\{day\}`, `\d{2}`).Replace(pattern)
		templates[tn] = regexp.MustCompile(pattern)
		if path != tn+"/year=${year}/month=${month}/day=${day}/" {
			t.Errorf("%s: location template path %q, want the archive layout's %s/year=${year}/month=${month}/day=${day}/", tn, path, tn)
		}

		sd := in["StorageDescriptor"].(map[string]any)
		if got := fmt.Sprint(sd["SerdeInfo"].(map[string]any)["SerializationLibrary"]); got != "org.openx.data.jsonserde.JsonSerDe" {
			t.Errorf("%s: SerDe %s", tn, got)
		}
		var cols []string
		for _, c := range sd["Columns"].([]any) {
			c := c.(map[string]any)
			cols = append(cols, fmt.Sprint(c["Name"], " ", c["Type"]))
		}
		var wantCols []string
		for _, c := range stack.ArchiveColumns(tn) {
			wantCols = append(wantCols, c.Name+" "+c.Type)
		}
		if d := cmp.Diff(wantCols, cols); d != "" {
			t.Errorf("%s: columns (-want +got):\n%s", tn, d)
		}
		def, _ := tables.ByName(tn)
		if !strings.Contains(cols[2], strings.ToLower(def.PartitionKey.Name)+":string") {
			t.Errorf("%s: keys column %s lacks the table's key %s", tn, cols[2], def.PartitionKey.Name)
		}
		var parts []string
		for _, p := range in["PartitionKeys"].([]any) {
			parts = append(parts, fmt.Sprint(p.(map[string]any)["Name"]))
		}
		if d := cmp.Diff(stack.ArchivePartitionKeys, parts); d != "" {
			t.Errorf("%s: partition keys (-want +got):\n%s", tn, d)
		}
	}

	// Every object in the archiver's golden samples falls under its table's
	// location template, and every field of its lines is a column.
	raw, err := os.ReadFile(filepath.Join("..", "..", "..", "functions", "archiver", "archiving", "testdata", "samples.golden"))
	if err != nil {
		t.Fatal(err)
	}
	var samples []struct {
		Objects map[string][]map[string]any `json:"objects"`
	}
	if err := json.Unmarshal(raw, &samples); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, sm := range samples {
		for key, lines := range sm.Objects {
			n++
			tn, _, _ := strings.Cut(key, "/")
			re, ok := templates[tn]
			if !ok || !re.MatchString(key) {
				t.Errorf("archived object %s is under no table's location template", key)
			}
			for _, l := range lines {
				for field := range l {
					name := strings.ToLower(field)
					if name == "table" {
						name = "source_table"
					}
					if !slices.ContainsFunc(stack.ArchiveColumns(tn), func(c stack.ArchiveColumn) bool { return c.Name == name }) {
						t.Errorf("%s: line field %s has no column", key, field)
					}
				}
			}
		}
	}
	if n == 0 {
		t.Fatal("no archived objects in the archiver's samples")
	}
}
