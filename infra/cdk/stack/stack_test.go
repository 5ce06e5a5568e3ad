package stack_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/aws-cdk-go/awscdk/v2/cxapi"
	"github.com/aws/jsii-runtime-go"
	"github.com/cdklabs/cdk-nag-go/cdknag/v2"

	"github.com/shopstream/shopstream/infra/cdk/stack"
	"github.com/shopstream/shopstream/shared/wiring"
)

// synthesized is one stage's stack, synthesized once for every test.
type synthesized struct {
	stack    *stack.Stack
	template assertions.Template
	// json is the template as plain data, for checks the matchers cannot express.
	json map[string]any
	nag  assertions.Annotations
}

var stages map[string]*synthesized

func TestMain(m *testing.M) {
	code, err := run(m)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(code)
}

func run(m *testing.M) (int, error) {
	defer jsii.Close()
	dist, err := os.MkdirTemp("", "shopstream-dist-")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(dist)
	for _, fn := range wiring.Functions() {
		if err := os.MkdirAll(filepath.Join(dist, fn), 0o755); err != nil {
			return 0, err
		}
		if err := os.WriteFile(filepath.Join(dist, fn, stack.Handler), []byte("#!/bin/sh\n# stand-in for "+fn+"\n"), 0o755); err != nil {
			return 0, err
		}
	}
	stages = map[string]*synthesized{}
	for _, name := range stack.Stages() {
		cfg, err := stack.StageConfig(name)
		if err != nil {
			return 0, err
		}
		app := awscdk.NewApp(&awscdk.AppProps{Outdir: jsii.String(filepath.Join(dist, "cdk.out-"+name))})
		s, err := stack.New(app, cfg.Name, stack.Props{Config: cfg, DistDir: dist, Routes: testRoutes()})
		if err != nil {
			return 0, err
		}
		awscdk.Aspects_Of(app).Add(cdknag.NewAwsSolutionsChecks(&cdknag.NagPackProps{Verbose: jsii.Bool(true)}), nil)
		tpl := assertions.Template_FromStack(s.Stack, nil)
		raw, err := json.Marshal(tpl.ToJSON())
		if err != nil {
			return 0, err
		}
		var doc map[string]any
		if err := json.Unmarshal(raw, &doc); err != nil {
			return 0, err
		}
		stages[name] = &synthesized{stack: s, template: tpl, json: doc, nag: assertions.Annotations_FromStack(s.Stack)}
	}
	return m.Run(), nil
}

func testRoutes() []stack.Route {
	return []stack.Route{{Method: "GET", Path: "/healthz", Public: true}, {Method: "GET", Path: "/users/{userId}"}}
}

func TestNagErrors(t *testing.T) {
	for name, s := range stages {
		for _, kind := range []string{"error", "warning"} {
			var msgs *[]*cxapi.SynthesisMessage
			if kind == "error" {
				msgs = s.nag.FindError(jsii.String("*"), assertions.Match_StringLikeRegexp(jsii.String("AwsSolutions-.*")))
			} else {
				msgs = s.nag.FindWarning(jsii.String("*"), assertions.Match_StringLikeRegexp(jsii.String("AwsSolutions-.*")))
			}
			for _, m := range *msgs {
				t.Errorf("%s %s: %s: %v", name, kind, *m.Id, m.Entry.Data)
			}
		}
	}
}
