package stack_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/shopstream/shopstream/infra/cdk/stack"
	"github.com/shopstream/shopstream/shared/envcontract"
	"github.com/shopstream/shopstream/shared/wiring"
)

// TestAlarmTopicEncrypted: the alarm topic is encrypted with a key of the
// stack that rotates and that CloudWatch of this account may use, and every
// alarm publishes to it.
func TestAlarmTopicEncrypted(t *testing.T) {
	for _, name := range stageNames() {
		s := stages[name]
		t.Run(name, func(t *testing.T) {
			topicID := s.logicalID(s.stack.AlarmTopic)
			keyID := s.logicalID(s.stack.AlarmKey)
			topic := props(s.resources("AWS::SNS::Topic")[topicID])
			if got := refs(topic["KmsMasterKeyId"]); !slices.Equal(got, []string{keyID}) {
				t.Errorf("topic key %v, want %s", got, keyID)
			}
			key := props(s.resources("AWS::KMS::Key")[keyID])
			if key["EnableKeyRotation"] != true {
				t.Error("key rotation off")
			}
			var cloudwatch bool
			for _, st := range key["KeyPolicy"].(map[string]any)["Statement"].([]any) {
				st := st.(map[string]any)
				if fmt.Sprint(st["Principal"]) == fmt.Sprint(map[string]any{"Service": "cloudwatch.amazonaws.com"}) {
					cloudwatch = true
					if d := cmp.Diff([]string{"kms:Decrypt", "kms:GenerateDataKey*"}, sorted(strs(st["Action"]))); d != "" {
						t.Errorf("cloudwatch's key actions (-want +got):\n%s", d)
					}
					if !strings.Contains(fmt.Sprint(st["Condition"]), "aws:SourceAccount") {
						t.Errorf("cloudwatch's use of the key not bound to the account: %v", st["Condition"])
					}
				}
			}
			if !cloudwatch {
				t.Error("CloudWatch may not use the topic's key: alarms could not publish")
			}
			// The topic's own policy (EnforceSSL gives it one, replacing
			// SNS's default) must let CloudWatch publish, for this stage's
			// alarms only; each alarm's name falls under that pattern.
			var publish map[string]any
			for _, pol := range s.resources("AWS::SNS::TopicPolicy") {
				pp := props(pol)
				if !slices.Contains(refs(pp["Topics"]), topicID) {
					continue
				}
				for _, st := range pp["PolicyDocument"].(map[string]any)["Statement"].([]any) {
					st := st.(map[string]any)
					if st["Effect"] == "Allow" && fmt.Sprint(st["Principal"]) == fmt.Sprint(map[string]any{"Service": "cloudwatch.amazonaws.com"}) {
						publish = st
					}
				}
			}
			if publish == nil {
				t.Fatal("the topic's policy lets no CloudWatch alarm publish: every alarm action would be refused")
			}
			if d := cmp.Diff([]string{"sns:Publish"}, strs(publish["Action"])); d != "" {
				t.Errorf("cloudwatch's topic actions (-want +got):\n%s", d)
			}
			cond := fmt.Sprint(publish["Condition"])
			prefix := "alarm:" + mustConfig(t, name).Name + "-*"
			if !strings.Contains(cond, "aws:SourceAccount") || !strings.Contains(cond, prefix) {
				t.Errorf("cloudwatch's publishing not bound to the account and to %s: %v", prefix, cond)
			}
			for id, a := range s.resources("AWS::CloudWatch::Alarm") {
				if got := refs(props(a)["AlarmActions"]); !slices.Equal(got, []string{topicID}) {
					t.Errorf("alarm %s acts on %v, want the topic", id, got)
				}
				if an, _ := props(a)["AlarmName"].(string); !strings.HasPrefix(an, mustConfig(t, name).Name+"-") {
					t.Errorf("alarm %s named %q: outside the topic policy's %s", id, an, prefix)
				}
			}
		})
	}
}

// TestSearchAlarms: AWS's recommended OpenSearch alarms, with its
// statistics, periods and thresholds; yellow only where a replica can be
// placed.
func TestSearchAlarms(t *testing.T) {
	for _, name := range stageNames() {
		s := stages[name]
		cfg, _ := stack.StageConfig(name)
		t.Run(name, func(t *testing.T) {
			got := map[string]string{}
			for _, a := range s.resources("AWS::CloudWatch::Alarm") {
				p := props(a)
				if p["Namespace"] != "AWS/ES" {
					continue
				}
				got[p["MetricName"].(string)] = fmt.Sprint(p["Statistic"], " ", p["Period"], " ", p["ComparisonOperator"], " ", p["Threshold"], " ", p["EvaluationPeriods"])
				dims := fmt.Sprint(p["Dimensions"])
				if !strings.Contains(dims, "DomainName") || !strings.Contains(dims, "ClientId") {
					t.Errorf("%s: dimensions %s, want DomainName and ClientId", p["MetricName"], dims)
				}
			}
			gte := "GreaterThanOrEqualToThreshold"
			want := map[string]string{
				"ClusterStatus.red":         "Maximum 60 " + gte + " 1 1",
				"FreeStorageSpace":          fmt.Sprint("Minimum 60 LessThanOrEqualToThreshold ", cfg.Search.VolumeGiB*1024/4, " 1"),
				"JVMMemoryPressure":         "Maximum 60 " + gte + " 95 3",
				"ClusterIndexWritesBlocked": "Maximum 300 " + gte + " 1 1",
				"AutomatedSnapshotFailure":  "Maximum 60 " + gte + " 1 1",
			}
			if cfg.Search.DataNodes >= 2 {
				want["ClusterStatus.yellow"] = "Maximum 60 " + gte + " 1 5"
			}
			if d := cmp.Diff(want, got); d != "" {
				t.Errorf("search alarms (-want +got):\n%s", d)
			}
		})
	}
}

// TestArchiveVersioned: the archive keeps a replaced or deleted archived
// object's previous version for ArchiveNoncurrentDays.
func TestArchiveVersioned(t *testing.T) {
	for _, name := range stageNames() {
		s := stages[name]
		p := props(s.resources("AWS::S3::Bucket")[s.logicalID(s.stack.Archive)])
		if got := fmt.Sprint(p["VersioningConfiguration"]); got != "map[Status:Enabled]" {
			t.Errorf("%s: versioning %s, want Enabled", name, got)
		}
		rules := p["LifecycleConfiguration"].(map[string]any)["Rules"].([]any)
		var kept []any
		for _, r := range rules {
			if nc, ok := r.(map[string]any)["NoncurrentVersionExpiration"].(map[string]any); ok && r.(map[string]any)["Prefix"] != wiring.AuditDigestPrefix {
				kept = append(kept, nc["NoncurrentDays"])
			}
			if exp, ok := r.(map[string]any)["ExpirationInDays"]; ok {
				t.Errorf("%s: archive objects expire after %v days, want never", name, exp)
			}
		}
		// One rule for each archived table (orders, carts).
		if d := cmp.Diff([]any{float64(stack.ArchiveNoncurrentDays), float64(stack.ArchiveNoncurrentDays)}, kept); d != "" {
			t.Errorf("%s: noncurrent versions kept (-want +got):\n%s", name, d)
		}
	}
}

func TestParseReservedConcurrency(t *testing.T) {
	prod, _ := stack.StageConfig(stack.Prod)
	if len(prod.ReservedConcurrency) == 0 {
		t.Fatal("prod reserves no concurrency, want the stream processors' reservation by default")
	}
	for _, tc := range []struct {
		in   string
		want map[string]int
		err  string
	}{
		{in: "none", want: map[string]int{}},
		{in: "counters=2, archiver=0", want: map[string]int{wiring.Counters: 2, wiring.Archiver: 0}},
		{in: "counters", err: "function=count"},
		{in: "nope=1", err: "unknown function"},
		{in: "counters=-1", err: "whole number"},
		{in: "counters=1,counters=2", err: "twice"},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, err := stack.ParseReservedConcurrency(tc.in)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("got %v, %v, want an error containing %q", got, err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("(-want +got):\n%s", d)
			}
		})
	}
}

// TestCursorSecretReadAtInit: the API's configuration names the cursor
// secret and holds no key (no dynamic reference that CloudFormation would
// resolve into it), and its role may read that one secret's values only.
func TestCursorSecretReadAtInit(t *testing.T) {
	for _, name := range stageNames() {
		s := stages[name]
		t.Run(name, func(t *testing.T) {
			secretID := s.logicalID(s.stack.CursorSecret)
			for fnName, a := range stack.Accesses() {
				p := props(s.resources("AWS::Lambda::Function")[s.logicalID(s.stack.Functions[fnName])])
				vars := p["Environment"].(map[string]any)["Variables"].(map[string]any)
				if strings.Contains(fmt.Sprint(vars), "resolve:secretsmanager") {
					t.Errorf("%s: environment resolves a secret into plain text: %v", fnName, vars)
				}
				if _, ok := vars[envcontract.CursorSecret]; ok {
					t.Errorf("%s: %s in the deployed environment", fnName, envcontract.CursorSecret)
				}
				got := refs(vars[envcontract.CursorSecretARN])
				var want []string
				if a.CursorSecret {
					want = []string{secretID}
				}
				if !slices.Equal(got, want) {
					t.Errorf("%s: %s refers to %v, want %v", fnName, envcontract.CursorSecretARN, got, want)
				}
				var grants []string
				roleID := s.logicalID(s.stack.Functions[fnName].Role())
				for _, pol := range s.resources("AWS::IAM::Policy") {
					if !slices.Contains(refs(props(pol)["Roles"]), roleID) {
						continue
					}
					for _, st := range props(pol)["PolicyDocument"].(map[string]any)["Statement"].([]any) {
						st := st.(map[string]any)
						for _, act := range strs(st["Action"]) {
							if strings.HasPrefix(act, "secretsmanager:") || slices.Contains(refs(st["Resource"]), secretID) {
								grants = append(grants, fmt.Sprint(act, " ", st["Resource"]))
							}
						}
					}
				}
				var wantGrants []string
				if a.CursorSecret {
					wantGrants = []string{fmt.Sprint("secretsmanager:GetSecretValue ", map[string]any{"Ref": secretID})}
				}
				if d := cmp.Diff(wantGrants, grants); d != "" {
					t.Errorf("%s: secret grants (-want +got):\n%s", fnName, d)
				}
			}
		})
	}
}

// TestSearchLogsPolicyBoundToOurDomain: OpenSearch may write the domain's
// log groups for this account's domain only (aws:SourceAccount and
// aws:SourceArn), so no domain of another account can publish into them.
func TestSearchLogsPolicyBoundToOurDomain(t *testing.T) {
	for _, name := range stageNames() {
		s := stages[name]
		t.Run(name, func(t *testing.T) {
			policies := s.resources("AWS::Logs::ResourcePolicy")
			if len(policies) != 1 {
				t.Fatalf("got %d log resource policies, want 1", len(policies))
			}
			for _, p := range policies {
				doc := fmt.Sprint(props(p)["PolicyDocument"])
				for _, want := range []string{"es.amazonaws.com", "aws:SourceAccount", "aws:SourceArn", "domain/shopstream-" + name} {
					if !strings.Contains(doc, want) {
						t.Errorf("log policy lacks %q: %s", want, doc)
					}
				}
			}
		})
	}
}

// mustConfig is the configuration of stage name.
func mustConfig(t *testing.T, name string) stack.Config {
	t.Helper()
	cfg, err := stack.StageConfig(name)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// TestArchiveRulesFollowTheirPrefixes: the archive's rules name what they
// are for. The archived tables' objects move to colder storage and keep a
// replaced version for ArchiveNoncurrentDays; the audit's digest, which
// every audit run reads and rewrites, moves nowhere and keeps no old
// version past a day (a year of hourly audits kept every rewrite).
func TestArchiveRulesFollowTheirPrefixes(t *testing.T) {
	var archived []string
	for _, m := range wiring.Mappings() {
		if m.Function == wiring.Archiver {
			archived = append(archived, m.Table+"/")
		}
	}
	for _, name := range stageNames() {
		s := stages[name]
		p := props(s.resources("AWS::S3::Bucket")[s.logicalID(s.stack.Archive)])
		cold, digest := []string{}, 0
		for _, r := range p["LifecycleConfiguration"].(map[string]any)["Rules"].([]any) {
			rule := r.(map[string]any)
			prefix, _ := rule["Prefix"].(string)
			_, moves := rule["Transitions"]
			nc, _ := rule["NoncurrentVersionExpiration"].(map[string]any)
			switch {
			case prefix == wiring.AuditDigestPrefix:
				digest++
				if moves || nc == nil || nc["NoncurrentDays"] != float64(stack.AuditDigestNoncurrentDays) || rule["ExpiredObjectDeleteMarker"] != true {
					t.Errorf("%s: digest rule %v, want no transition, old versions gone after %d day, and their delete markers", name, rule, stack.AuditDigestNoncurrentDays)
				}
			case strings.HasPrefix(wiring.AuditDigestPrefix, prefix) && (moves || nc != nil):
				t.Errorf("%s: rule %v (prefix %q) applies to the audit digest too", name, rule["Id"], prefix)
			case moves:
				cold = append(cold, prefix)
			}
		}
		slices.Sort(cold)
		slices.Sort(archived)
		if d := cmp.Diff(archived, cold); d != "" || digest != 1 {
			t.Errorf("%s: prefixes moved to colder storage (-want +got):\n%s; digest rules %d, want 1", name, d, digest)
		}
	}
}
