package invoke

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// Command is `make invoke` (`go run ./infra/local invoke`): the flags of
// `sam local invoke` that apply without Docker, then the function.
//
//	invoke [-t template.yaml] -e events/x.json [-env-vars events/sam-env.json] [-build-dir dir] <function>
//
// The function's response goes to stdout, its output and a line of timings
// to stderr. A function error or timeout is an error. lookup is the shell's
// environment (os.LookupEnv).
func Command(ctx context.Context, args []string, lookup func(string) (string, bool), stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("invoke", flag.ContinueOnError)
	fs.SetOutput(stderr)
	tmpl := fs.String("t", "template.yaml", "the SAM template")
	eventPath := fs.String("e", "", "the event, a JSON file")
	envVars := fs.String("env-vars", "", "JSON file of variable values, as sam local invoke --env-vars")
	buildDir := fs.String("build-dir", "", "folder of built functions (<LogicalId>/bootstrap); empty: build now")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: invoke [-t template.yaml] -e event.json [-env-vars file.json] [-build-dir dir] <function>")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 || *eventPath == "" {
		fs.Usage()
		return errors.New("want -e and one function (logical id, FunctionName or folder under functions/)")
	}
	t, err := Load(*tmpl, nil)
	if err != nil {
		return err
	}
	f, err := t.Function(fs.Arg(0))
	if err != nil {
		return err
	}
	event, err := os.ReadFile(*eventPath)
	if err != nil {
		return fmt.Errorf("event: %w", err)
	}
	file := EnvVars{}
	if *envVars != "" {
		if file, err = ReadEnvVars(*envVars); err != nil {
			return err
		}
	}
	fnEnv := f.Environment(lookup, file, ShellCredentials(lookup))
	if err := CheckTables(ctx, fnEnv); err != nil {
		return err
	}
	var bin string
	if *buildDir != "" {
		bin = filepath.Join(*buildDir, f.LogicalID, "bootstrap")
		if _, err := os.Stat(bin); err != nil {
			return fmt.Errorf("%s not built: %w", f.LogicalID, err)
		}
	} else {
		dir, err := os.MkdirTemp("", "shopstream-invoke-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		if bin, err = Build(ctx, f, dir); err != nil {
			return err
		}
	}
	env := ProcessEnv(f, bin, fnEnv)
	res, err := Run(ctx, f, bin, env, event, stderr)
	if err != nil {
		return err
	}
	fmt.Fprintf(stderr, "invoke: %s: init %d ms, first response %d ms after start\n", f.LogicalID, res.Init.Milliseconds(), res.ToResponse.Milliseconds())
	if res.Err != nil {
		return res.Err
	}
	_, err = fmt.Fprintf(stdout, "%s\n", res.Response)
	return err
}
