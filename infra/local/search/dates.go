package search

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// dateLayouts are the forms of OpenSearch's strict_date_optional_time that a
// date field accepts, most specific first. A value without a zone is UTC.
func dateLayouts() []string {
	return []string{
		"2006-01-02T15:04:05.999999999Z07:00",
		"2006-01-02T15:04:05.999999999Z0700",
		"2006-01-02T15:04:05.999999999",
		"2006-01-02T15:04Z07:00",
		"2006-01-02T15:04",
		"2006-01-02T15Z07:00",
		"2006-01-02T15",
		"2006-01-02",
		"2006/01/02 15:04:05 Z0700",
		"2006/01/02 15:04:05",
		"2006/01/02 Z0700",
		"2006/01/02",
		"2006-01",
		"2006",
	}
}

// looksLikeDate is dynamic mapping's date detection: a string becomes a date
// field when it parses as a full calendar date at least.
func looksLikeDate(s string) bool {
	if len(s) < len("2006-01-02") || s[0] < '0' || s[0] > '9' {
		return false
	}
	_, err := parseDateString(s, "")
	return err == nil
}

// parseDateValue converts a document or query value of a date field to epoch milliseconds.
func parseDateValue(v any, format string) (int64, error) {
	switch x := v.(type) {
	case json.Number:
		f, err := strconv.ParseFloat(string(x), 64)
		if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
			return 0, fmt.Errorf("not a number: %s", x)
		}
		if strings.Contains(format, "epoch_second") && !strings.Contains(format, "epoch_millis") {
			f *= 1000
		}
		return int64(f), nil
	case float64:
		return int64(x), nil
	case string:
		return parseDateString(x, format)
	}
	return 0, fmt.Errorf("a date must be a string or a number, got %T", v)
}

func parseDateString(s, format string) (int64, error) {
	if s == "" {
		return 0, fmt.Errorf("empty date")
	}
	if isDigits(s) && (format == "" || strings.Contains(format, "epoch_")) {
		n, err := strconv.ParseInt(s, 10, 64)
		if err == nil && (len(s) > 4 || strings.Contains(format, "epoch_")) {
			if strings.Contains(format, "epoch_second") && !strings.Contains(format, "epoch_millis") {
				return n * 1000, nil
			}
			return n, nil
		}
	}
	for _, layout := range dateLayouts() {
		if t, err := time.Parse(layout, s); err == nil {
			return t.UnixMilli(), nil
		}
	}
	return 0, fmt.Errorf("failed to parse date [%s] with format [strict_date_optional_time||epoch_millis]", s)
}

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := range len(s) {
		if s[i] < '0' || s[i] > '9' {
			if i == 0 && s[i] == '-' && len(s) > 1 {
				continue
			}
			return false
		}
	}
	return true
}

// errDateMath is a bound written in date math ("now-7d/d",
// "2024-01-01||+1M"): nothing shopstream sends uses it (docs/decisions.md,
// "Local search"), so it is refused rather than resolved.
var errDateMath = errors.New("date math is not supported by the local search service")

// parseDateBound reads a date bound or term value as epoch milliseconds.
func parseDateBound(v any, format string) (int64, error) {
	if s, ok := v.(string); ok && (strings.HasPrefix(s, "now") || strings.Contains(s, "||")) {
		return 0, errDateMath
	}
	return parseDateValue(v, format)
}

// parseDuration reads an OpenSearch time value such as "60s", "500ms" or "1m".
func parseDuration(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	units := []struct {
		suffix string
		d      time.Duration
	}{
		{"nanos", time.Nanosecond}, {"micros", time.Microsecond}, {"ms", time.Millisecond},
		{"s", time.Second}, {"m", time.Minute}, {"h", time.Hour}, {"d", 24 * time.Hour},
	}
	for _, u := range units {
		if num, ok := strings.CutSuffix(s, u.suffix); ok {
			n, err := strconv.ParseFloat(num, 64)
			if err != nil || n < 0 {
				break
			}
			return time.Duration(n * float64(u.d)), nil
		}
	}
	if n, err := strconv.ParseInt(s, 10, 64); err == nil && n >= 0 {
		return time.Duration(n) * time.Millisecond, nil
	}
	return 0, fmt.Errorf("failed to parse time value [%s]", s)
}
