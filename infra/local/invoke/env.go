package invoke

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
)

// EnvVars is the content of a `sam local invoke --env-vars` file: per
// function (by logical id or FunctionName) a map of values, and under
// "Parameters" values for every function; a function's own entry wins.
type EnvVars map[string]map[string]any

// ReadEnvVars reads an --env-vars file. As in SAM, every top-level value must
// be an object.
func ReadEnvVars(path string) (EnvVars, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("env vars: %w", err)
	}
	return ParseEnvVars(raw)
}

// ParseEnvVars parses the JSON of an --env-vars file.
func ParseEnvVars(raw []byte) (EnvVars, error) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(raw, &top); err != nil {
		return nil, fmt.Errorf("env vars: %w", err)
	}
	out := EnvVars{}
	for k, v := range top {
		d := json.NewDecoder(bytes.NewReader(v))
		d.UseNumber()
		var m map[string]any
		if err := d.Decode(&m); err != nil || m == nil {
			return nil, fmt.Errorf("env vars: %s: environment variables in incorrect format, want an object", k)
		}
		out[k] = m
	}
	return out, nil
}

// overrides are the file's values for f: "Parameters" first, then the
// function's own entry on top (the first non-empty one of its logical id and
// its FunctionName).
func (e EnvVars) overrides(f *Function) map[string]any {
	out := map[string]any{}
	for k, v := range e["Parameters"] {
		out[k] = v
	}
	own := e[f.LogicalID]
	if len(own) == 0 && f.Name != "" {
		own = e[f.Name]
	}
	for k, v := range own {
		out[k] = v
	}
	return out
}

// Credentials are what SAM passes as the AWS_* credential variables.
type Credentials struct {
	Region, AccessKeyID, SecretAccessKey, SessionToken string
}

// ShellCredentials reads credentials and region from the shell's variables,
// with SAM's placeholders (us-east-1, defaultkey, defaultsecret) for what is
// missing. SAM also reads a named profile; this reads only the variables.
func ShellCredentials(lookup func(string) (string, bool)) Credentials {
	get := func(def string, keys ...string) string {
		for _, k := range keys {
			if v, ok := lookup(k); ok && v != "" {
				return v
			}
		}
		return def
	}
	return Credentials{
		Region:          get("us-east-1", "AWS_DEFAULT_REGION", "AWS_REGION"),
		AccessKeyID:     get("defaultkey", "AWS_ACCESS_KEY_ID"),
		SecretAccessKey: get("defaultsecret", "AWS_SECRET_ACCESS_KEY"),
		SessionToken:    get("", "AWS_SESSION_TOKEN"),
	}
}

// Environment is the environment SAM gives f (samcli/local/lambdafn/env_vars.py):
// the AWS_* variables of the function's configuration and credentials, then
// every variable the template declares and nothing else, each valued from
// the template, replaced by the shell's value when the shell has the
// variable (even empty), replaced by the --env-vars file's when it names it.
// Values that are objects, lists or null (an intrinsic SAM could not
// resolve) become "", booleans "true"/"false", numbers their decimal text.
func (f *Function) Environment(shell func(string) (string, bool), file EnvVars, creds Credentials) map[string]string {
	env := map[string]string{
		"AWS_SAM_LOCAL":                   "true",
		"AWS_LAMBDA_FUNCTION_MEMORY_SIZE": strconv.Itoa(f.MemoryMiB),
		"AWS_LAMBDA_FUNCTION_TIMEOUT":     strconv.Itoa(int(f.Timeout.Seconds())),
		"AWS_LAMBDA_FUNCTION_HANDLER":     f.Handler,
		"AWS_LAMBDA_FUNCTION_NAME":        f.LogicalID,
		"AWS_LAMBDA_FUNCTION_VERSION":     "$LATEST",
		"AWS_LAMBDA_LOG_GROUP_NAME":       "aws/lambda/" + f.LogicalID,
		"AWS_LAMBDA_LOG_STREAM_NAME":      "$LATEST",
		"AWS_REGION":                      creds.Region,
		"AWS_DEFAULT_REGION":              creds.Region,
		"AWS_ACCESS_KEY_ID":               creds.AccessKeyID,
		"AWS_SECRET_ACCESS_KEY":           creds.SecretAccessKey,
		"AWS_ACCOUNT_ID":                  "123456789012",
		"AWS_LAMBDA_INITIALIZATION_TYPE":  "on-demand",
	}
	if creds.SessionToken != "" {
		env["AWS_SESSION_TOKEN"] = creds.SessionToken
	}
	if f.LogFormat != "" {
		env["AWS_LAMBDA_LOG_FORMAT"] = f.LogFormat
		if f.LogFormat == "JSON" {
			env["AWS_LAMBDA_LOG_LEVEL"] = f.LogLevel
			if f.LogLevel == "" {
				env["AWS_LAMBDA_LOG_LEVEL"] = "INFO"
			}
		}
	}
	overrides := file.overrides(f)
	for name, v := range f.Variables {
		if s, ok := shell(name); ok {
			v = s
		}
		if o, ok := overrides[name]; ok {
			v = o
		}
		env[name] = stringify(v)
	}
	return env
}

// stringify turns a template or --env-vars value into an environment value
// as SAM does (Python's str(), "true"/"false" for booleans, "" for objects,
// lists and null).
func stringify(v any) string {
	switch x := v.(type) {
	case nil, map[string]any, []any:
		return ""
	case string:
		return x
	case bool:
		return strconv.FormatBool(x)
	case int:
		return strconv.Itoa(x)
	case json.Number:
		if !strings.ContainsAny(x.String(), ".eE") {
			return x.String()
		}
		f, err := x.Float64()
		if err != nil {
			return x.String()
		}
		return pythonFloat(f)
	case float64:
		return pythonFloat(x)
	default:
		return fmt.Sprint(x)
	}
}

// pythonFloat formats f as Python's str() does: 1.0, 1.5, 1e+16, 1e-05.
func pythonFloat(f float64) string {
	switch {
	case math.IsInf(f, 1):
		return "inf"
	case math.IsInf(f, -1):
		return "-inf"
	case math.IsNaN(f):
		return "nan"
	}
	if a := math.Abs(f); a != 0 && (a >= 1e16 || a < 1e-4) {
		return strconv.FormatFloat(f, 'e', -1, 64)
	}
	s := strconv.FormatFloat(f, 'f', -1, 64)
	if !strings.Contains(s, ".") {
		s += ".0"
	}
	return s
}
