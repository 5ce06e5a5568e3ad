// Command cdk is the CDK app of shopstream: one stack per stage, chosen with
// the stage context (cdk deploy -c stage=prod). Its constructs come from
// infra/cdk/stack; cdk-nag's AwsSolutions pack checks them at every synth.
package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/jsii-runtime-go"
	"github.com/cdklabs/cdk-nag-go/cdknag/v2"

	"github.com/shopstream/shopstream/infra/cdk/stack"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "cdk:", err)
		os.Exit(1)
	}
}

func run() error {
	defer jsii.Close()
	app := awscdk.NewApp(nil)
	// The stage, with the reservedConcurrency and saleWarmThroughput
	// settings: an unreadable one stops the synth with its error.
	cfg, err := stack.ContextConfig(app)
	if err != nil {
		return err
	}
	dist := stack.ContextString(app, "dist", "")
	if dist == "" {
		root, err := moduleRoot()
		if err != nil {
			return err
		}
		dist = filepath.Join(root, "dist")
	}
	_, err = stack.New(app, cfg.Name, stack.Props{
		StackProps: awscdk.StackProps{Env: environment()},
		Config:     cfg,
		DistDir:    dist,
		Routes:     stack.DeclaredRoutes(),
		AlarmEmail: stack.ContextString(app, "alarmEmail", ""),
	})
	if err != nil {
		return err
	}
	awscdk.Aspects_Of(app).Add(cdknag.NewAwsSolutionsChecks(&cdknag.NagPackProps{Verbose: jsii.Bool(true)}), nil)
	app.Synth(nil)
	return nil
}

// environment targets the account and region of the CLI's credentials when
// there are any; without them the stack is environment-agnostic (synth, tests).
func environment() *awscdk.Environment {
	account, region := os.Getenv("CDK_DEFAULT_ACCOUNT"), os.Getenv("CDK_DEFAULT_REGION")
	if account == "" || region == "" {
		return nil
	}
	return &awscdk.Environment{Account: jsii.String(account), Region: jsii.String(region)}
}

// moduleRoot is the directory of go.mod above the working directory: cdk runs
// the app from infra/cdk, make from the repository root.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod above the working directory; pass -c dist=<dir>")
		}
		dir = parent
	}
}
