package search

import (
	"encoding/json"
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

// parseDateMath resolves a range bound such as "now-7d/d" or
// "2024-01-01||+1M" to epoch milliseconds. roundUp selects the end of a
// rounded unit (used by lte and gt, as OpenSearch does).
func parseDateMath(v any, format string, now time.Time, roundUp bool) (int64, error) {
	s, ok := v.(string)
	if !ok {
		return parseDateValue(v, format)
	}
	var t time.Time
	var expr string
	switch {
	case strings.HasPrefix(s, "now"):
		t, expr = now.UTC(), s[len("now"):]
	case strings.Contains(s, "||"):
		i := strings.Index(s, "||")
		ms, err := parseDateString(s[:i], format)
		if err != nil {
			return 0, err
		}
		t, expr = time.UnixMilli(ms).UTC(), s[i+2:]
	default:
		return parseDateString(s, format)
	}
	for expr != "" {
		op := expr[0]
		expr = expr[1:]
		switch op {
		case '+', '-':
			n := 0
			for n < len(expr) && expr[n] >= '0' && expr[n] <= '9' {
				n++
			}
			amount := 1
			if n > 0 {
				amount, _ = strconv.Atoi(expr[:n])
			}
			expr = expr[n:]
			if expr == "" {
				return 0, fmt.Errorf("date math [%s]: missing unit", s)
			}
			unit := expr[0]
			expr = expr[1:]
			if op == '-' {
				amount = -amount
			}
			var err error
			if t, err = addUnit(t, unit, amount); err != nil {
				return 0, fmt.Errorf("date math [%s]: %w", s, err)
			}
		case '/':
			if expr == "" {
				return 0, fmt.Errorf("date math [%s]: missing rounding unit", s)
			}
			unit := expr[0]
			expr = expr[1:]
			start, err := truncateUnit(t, unit)
			if err != nil {
				return 0, fmt.Errorf("date math [%s]: %w", s, err)
			}
			t = start
			if roundUp {
				next, _ := addUnit(start, unit, 1)
				t = next.Add(-time.Millisecond)
			}
		default:
			return 0, fmt.Errorf("date math [%s]: unexpected operator %q", s, op)
		}
	}
	return t.UnixMilli(), nil
}

func addUnit(t time.Time, unit byte, n int) (time.Time, error) {
	switch unit {
	case 'y':
		return t.AddDate(n, 0, 0), nil
	case 'M':
		return t.AddDate(0, n, 0), nil
	case 'w':
		return t.AddDate(0, 0, 7*n), nil
	case 'd':
		return t.AddDate(0, 0, n), nil
	case 'h', 'H':
		return t.Add(time.Duration(n) * time.Hour), nil
	case 'm':
		return t.Add(time.Duration(n) * time.Minute), nil
	case 's':
		return t.Add(time.Duration(n) * time.Second), nil
	}
	return t, fmt.Errorf("unknown unit %q", unit)
}

func truncateUnit(t time.Time, unit byte) (time.Time, error) {
	y, mo, d := t.Date()
	switch unit {
	case 'y':
		return time.Date(y, 1, 1, 0, 0, 0, 0, time.UTC), nil
	case 'M':
		return time.Date(y, mo, 1, 0, 0, 0, 0, time.UTC), nil
	case 'w':
		day := time.Date(y, mo, d, 0, 0, 0, 0, time.UTC)
		offset := (int(day.Weekday()) + 6) % 7 // weeks start on Monday
		return day.AddDate(0, 0, -offset), nil
	case 'd':
		return time.Date(y, mo, d, 0, 0, 0, 0, time.UTC), nil
	case 'h', 'H':
		return t.Truncate(time.Hour), nil
	case 'm':
		return t.Truncate(time.Minute), nil
	case 's':
		return t.Truncate(time.Second), nil
	}
	return t, fmt.Errorf("unknown unit %q", unit)
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
