package stack_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/jsii-runtime-go"
	"github.com/cdklabs/cdk-nag-go/cdknag/v2"
	"github.com/google/go-cmp/cmp"

	"github.com/shopstream/shopstream/infra/cdk/stack"
	"github.com/shopstream/shopstream/shared/tables"
)

// stageCapacity is what docs/deploy.md ("Sale day") argues for each stage.
var stageCapacity = map[string]struct {
	pitrDays int
	max      stack.Throughput
}{
	stack.Dev:  {pitrDays: 7, max: stack.Throughput{Reads: 1000, Writes: 1000}},
	stack.Prod: {pitrDays: 35, max: stack.Throughput{Reads: 12000, Writes: 4000}},
}

// onDemandThroughput is the OnDemandThroughput property a limit renders as.
func onDemandThroughput(l stack.Throughput) any {
	if l == (stack.Throughput{}) {
		return nil
	}
	m := map[string]any{}
	if l.Reads > 0 {
		m["MaxReadRequestUnits"] = float64(l.Reads)
	}
	if l.Writes > 0 {
		m["MaxWriteRequestUnits"] = float64(l.Writes)
	}
	return m
}

// warmThroughput is the WarmThroughput property a sale's setting renders as.
func warmThroughput(w stack.Throughput) any {
	if w == (stack.Throughput{}) {
		return nil
	}
	m := map[string]any{}
	if w.Reads > 0 {
		m["ReadUnitsPerSecond"] = float64(w.Reads)
	}
	if w.Writes > 0 {
		m["WriteUnitsPerSecond"] = float64(w.Writes)
	}
	return m
}

// capacity is what a template says of each table's and global index's
// recovery period, maximum and warm throughput, by table or table.index.
type capacity struct {
	PITRDays any
	Max      any
	Warm     any
}

func capacities(t *testing.T, doc map[string]any, prefix string) map[string]capacity {
	t.Helper()
	out := map[string]capacity{}
	for _, r := range doc["Resources"].(map[string]any) {
		r := r.(map[string]any)
		if r["Type"] != "AWS::DynamoDB::Table" {
			continue
		}
		p := props(r)
		name := strings.TrimPrefix(p["TableName"].(string), prefix)
		pitr, _ := p["PointInTimeRecoverySpecification"].(map[string]any)
		out[name] = capacity{PITRDays: pitr["RecoveryPeriodInDays"], Max: p["OnDemandThroughput"], Warm: p["WarmThroughput"]}
		gsis, _ := p["GlobalSecondaryIndexes"].([]any)
		for _, g := range gsis {
			g := g.(map[string]any)
			out[stack.IndexTarget(name, g["IndexName"].(string))] = capacity{Max: g["OnDemandThroughput"], Warm: g["WarmThroughput"]}
		}
	}
	return out
}

// targets are every table and global index of shared/tables, as the
// saleWarmThroughput setting names them.
func targets() []string {
	var out []string
	for _, tb := range tables.All() {
		out = append(out, tb.Name)
		for _, ix := range tb.GlobalIndexes {
			out = append(out, stack.IndexTarget(tb.Name, ix.Name))
		}
	}
	return out
}

// want is the capacity a stage gives a target with the sale's warm throughput w.
func want(days int, max, w stack.Throughput, index bool) capacity {
	c := capacity{Max: onDemandThroughput(max), Warm: warmThroughput(w)}
	if !index {
		c.PITRDays = float64(days)
	}
	return c
}

// TestStageCapacity: every table's recovery period and every table's and
// global index's maximum throughput are the stage's, and no warm throughput
// is declared without a sale.
func TestStageCapacity(t *testing.T) {
	for _, name := range stageNames() {
		s := stages[name]
		cfg, _ := stack.StageConfig(name)
		t.Run(name, func(t *testing.T) {
			sc, ok := stageCapacity[name]
			if !ok {
				t.Fatalf("stage %s: no capacity argued in docs/deploy.md", name)
			}
			if cfg.PITRRecoveryDays != sc.pitrDays || cfg.MaxThroughput != sc.max {
				t.Errorf("got %d days, %+v, want %d days, %+v (docs/deploy.md, \"Sale day\")", cfg.PITRRecoveryDays, cfg.MaxThroughput, sc.pitrDays, sc.max)
			}
			got := capacities(t, s.json, cfg.TablePrefix())
			wantAll := map[string]capacity{}
			for _, target := range targets() {
				wantAll[target] = want(sc.pitrDays, sc.max, stack.Throughput{}, strings.Contains(target, "."))
			}
			if d := cmp.Diff(wantAll, got); d != "" {
				t.Errorf("capacity (-want +got):\n%s", d)
			}
		})
	}
}

// TestSaleWarmThroughput synthesizes prod as make deploy does for a sale
// (-c saleWarmThroughput=…): the targets it names are pre-warmed, a warmed
// direction's cap is lifted to its warm throughput (and dropped at the
// per-table quota), everything else keeps the stage's capacity, and cdk-nag
// stays clean.
func TestSaleWarmThroughput(t *testing.T) {
	const sale = "product-stock.writes=10000, product-stock.reads=40000,products.byCategory.reads=15000"
	cfg, s, tpl := synthWithContext(t, map[string]any{"stage": stack.Prod, stack.SaleWarmContext: sale})

	// The stock table as AWS's example declares a pre-warmed table.
	tpl.HasResourceProperties(jsii.String("AWS::DynamoDB::Table"), map[string]any{
		"TableName":          tables.Physical(cfg.TablePrefix(), tables.ProductStock),
		"WarmThroughput":     map[string]any{"ReadUnitsPerSecond": 40000, "WriteUnitsPerSecond": 10000},
		"OnDemandThroughput": map[string]any{"MaxWriteRequestUnits": 10000, "MaxReadRequestUnits": assertions.Match_Absent()},
	})

	raw, err := json.Marshal(tpl.ToJSON())
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	sc := stageCapacity[stack.Prod]
	wantAll := map[string]capacity{}
	for _, target := range targets() {
		wantAll[target] = want(sc.pitrDays, sc.max, stack.Throughput{}, strings.Contains(target, "."))
	}
	wantAll[tables.ProductStock] = want(sc.pitrDays, stack.Throughput{Writes: 10000}, stack.Throughput{Reads: 40000, Writes: 10000}, false)
	byCategory := stack.IndexTarget(tables.Products, tables.ProductsByCategory)
	// Its read cap lifted to what it is warmed for.
	wantAll[byCategory] = want(sc.pitrDays, stack.Throughput{Reads: 15000, Writes: sc.max.Writes}, stack.Throughput{Reads: 15000}, true)
	if d := cmp.Diff(wantAll, capacities(t, doc, cfg.TablePrefix())); d != "" {
		t.Errorf("capacity (-want +got):\n%s", d)
	}

	nag := assertions.Annotations_FromStack(s.Stack)
	rules := assertions.Match_StringLikeRegexp(jsii.String("AwsSolutions-.*"))
	findings := append(*nag.FindError(jsii.String("*"), rules), *nag.FindWarning(jsii.String("*"), rules)...)
	for _, m := range findings {
		t.Errorf("unsuppressed finding at %s: %v", *m.Id, m.Entry.Data)
	}
}

// synthWithContext synthesizes the stack as `cdk synth -c` does with ctx,
// with cdk-nag's checks, and returns its configuration, stack and template.
func synthWithContext(t *testing.T, ctx map[string]any) (stack.Config, *stack.Stack, assertions.Template) {
	t.Helper()
	app := awscdk.NewApp(&awscdk.AppProps{Outdir: jsii.String(t.TempDir()), Context: &ctx})
	cfg, err := stack.ContextConfig(app)
	if err != nil {
		t.Fatal(err)
	}
	s, err := stack.New(app, cfg.Name, stack.Props{Config: cfg, DistDir: standInDist, Routes: stack.DeclaredRoutes()})
	if err != nil {
		t.Fatal(err)
	}
	awscdk.Aspects_Of(app).Add(cdknag.NewAwsSolutionsChecks(&cdknag.NagPackProps{Verbose: jsii.Bool(true)}), nil)
	return cfg, s, assertions.Template_FromStack(s.Stack, nil)
}

// TestContextConfig: without the setting a stage is its own configuration;
// a setting that cannot be read stops the synth with an error naming it.
func TestContextConfig(t *testing.T) {
	app := func(ctx map[string]any) awscdk.App {
		return awscdk.NewApp(&awscdk.AppProps{Outdir: jsii.String(t.TempDir()), Context: &ctx})
	}
	for _, name := range stageNames() {
		cfg, err := stack.ContextConfig(app(map[string]any{"stage": name}))
		if err != nil {
			t.Fatal(err)
		}
		base, _ := stack.StageConfig(name)
		if cfg.SaleWarmThroughput != nil || cfg.PITRRecoveryDays != base.PITRRecoveryDays || cfg.MaxThroughput != base.MaxThroughput {
			t.Errorf("%s without a sale: got warm %v, %d days, max %+v, want none, %d, %+v", name, cfg.SaleWarmThroughput, cfg.PITRRecoveryDays, cfg.MaxThroughput, base.PITRRecoveryDays, base.MaxThroughput)
		}
	}
	for _, tc := range []struct{ sale, err string }{
		{"product-stock=8000", "names no direction"},
		{"product-stock.write=8000", `direction "write"`},
		{"stock.writes=8000", `unknown table "stock"`},
		{"products.byName.reads=100", `no global index "byName"`},
		{"reviews.byCreatedAt.reads=100", `no global index "byCreatedAt"`},
		{"product-stock.writes=0", "from 4000 ("},
		{"product-stock.writes=40001", "from 4000 ("},
		{"product-stock.writes=1e4", "from 4000 ("},
		{"product-stock.writes=3999", "from 4000 ("},
		{"products.byCategory.reads=11999", "from 12000 ("},
		{"product-stock.writes=8000,product-stock.writes=9000", "given twice"},
		{"product-stock.writes", "pairs"},
	} {
		t.Run(tc.sale, func(t *testing.T) {
			cfg, err := stack.ContextConfig(app(map[string]any{"stage": stack.Prod, stack.SaleWarmContext: tc.sale}))
			if err == nil || !strings.Contains(err.Error(), tc.err) || !strings.Contains(err.Error(), stack.SaleWarmContext) {
				t.Fatalf("got %+v, %v, want an error naming %s and containing %q", cfg.SaleWarmThroughput, err, stack.SaleWarmContext, tc.err)
			}
		})
	}
}

func TestParseSaleWarmThroughput(t *testing.T) {
	got, err := stack.ParseSaleWarmThroughput("product-stock.writes=8000, product-stock.reads=24000,orders.openByStatus.writes=6000,orders.writes=8000")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]stack.Throughput{
		tables.ProductStock: {Reads: 24000, Writes: 8000},
		stack.IndexTarget(tables.Orders, tables.OrdersOpenByStatus): {Writes: 6000},
		tables.Orders: {Writes: 8000},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
}

// TestMaxThroughputOf: a sale lifts a cap to its warm throughput, never
// lowers one, and a cap that would reach the per-table quota is none.
func TestMaxThroughputOf(t *testing.T) {
	cfg, _ := stack.StageConfig(stack.Prod)
	cfg.SaleWarmThroughput = map[string]stack.Throughput{tables.ProductStock: {Reads: 6000, Writes: 20000}, tables.Orders: {Writes: stack.TableQuota}}
	for _, tc := range []struct {
		target string
		want   stack.Throughput
	}{
		{tables.ProductStock, stack.Throughput{Reads: 12000, Writes: 20000}},
		{tables.Orders, stack.Throughput{Reads: 12000}},
		{tables.Users, stack.Throughput{Reads: 12000, Writes: 4000}},
	} {
		if got := cfg.MaxThroughputOf(tc.target); got != tc.want {
			t.Errorf("%s: got %+v, want %+v", tc.target, got, tc.want)
		}
	}
}

// TestInvalidCapacityFailsSynth: a stage configuration outside what AWS
// accepts is an error from stack.New, before any construct is declared.
func TestInvalidCapacityFailsSynth(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(*stack.Config)
		err    string
	}{
		{"no recovery period", func(c *stack.Config) { c.PITRRecoveryDays = 0 }, "1 to 35"},
		{"36 days", func(c *stack.Config) { c.PITRRecoveryDays = 36 }, "1 to 35"},
		{"cap at the quota", func(c *stack.Config) { c.MaxThroughput.Writes = stack.TableQuota }, "below DynamoDB's default per-table quota"},
		{"unknown warm target", func(c *stack.Config) { c.SaleWarmThroughput = map[string]stack.Throughput{"stock": {Writes: 5000}} }, `unknown table "stock"`},
		{"warm above the quota", func(c *stack.Config) {
			c.SaleWarmThroughput = map[string]stack.Throughput{tables.ProductStock: {Writes: stack.TableQuota + 1}}
		}, "from 4000 ("},
		// A new table or index serves 12,000 reads and 4,000 writes at once
		// already, and warm throughput is never lowered: less would fail at
		// deploy, not here.
		{"warm reads below a new table's", func(c *stack.Config) {
			c.SaleWarmThroughput = map[string]stack.Throughput{stack.IndexTarget(tables.Products, tables.ProductsByCategory): {Reads: 6000}}
		}, "from 12000 ("},
		{"warm writes below a new table's", func(c *stack.Config) {
			c.SaleWarmThroughput = map[string]stack.Throughput{stack.IndexTarget(tables.Orders, tables.OrdersOpenByStatus): {Writes: 2000}}
		}, "from 4000 ("},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, _ := stack.StageConfig(stack.Prod)
			tc.change(&cfg)
			app := awscdk.NewApp(&awscdk.AppProps{Outdir: jsii.String(t.TempDir())})
			_, err := stack.New(app, cfg.Name, stack.Props{Config: cfg, DistDir: standInDist, Routes: stack.DeclaredRoutes()})
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Fatalf("got %v, want an error containing %q", err, tc.err)
			}
		})
	}
}

// TestDeployDocArguesCapacity: docs/deploy.md's "Sale day" states each
// stage's recovery period and maximum throughput as the stage sets them.
func TestDeployDocArguesCapacity(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "..", "..", "docs", "deploy.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(raw), "\n## Sale day\n")
	if !ok {
		t.Fatal(`docs/deploy.md has no "## Sale day" section`)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	for _, name := range stageNames() {
		cfg, _ := stack.StageConfig(name)
		row := fmt.Sprintf("| %s | %d days | %s RRU/s, %s WRU/s |", name, cfg.PITRRecoveryDays, thousands(cfg.MaxThroughput.Reads), thousands(cfg.MaxThroughput.Writes))
		if !strings.Contains(section, row) {
			t.Errorf("docs/deploy.md, Sale day: no row %q", row)
		}
	}
}

// thousands writes n with a comma between thousands, as the docs do.
func thousands(n int) string {
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
