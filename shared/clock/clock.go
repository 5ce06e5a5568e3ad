// Package clock holds shopstream's notion of time: the fixed-width RFC 3339
// layout every stored timestamp uses, so that timestamps sort as strings (sort
// keys depend on it), and Epoch, an expiry in epoch seconds as DynamoDB's TTL
// wants it that reads as RFC 3339 in JSON.
package clock

import (
	"encoding/json"
	"time"
)

// Layout is RFC 3339 in UTC with exactly six fractional digits. time.RFC3339Nano
// drops trailing zeros, which breaks string ordering ("…:05Z" sorts after
// "…:05.1Z").
const Layout = "2006-01-02T15:04:05.000000Z"

// Format returns t in Layout.
func Format(t time.Time) string { return t.UTC().Format(Layout) }

// Epoch is a time in epoch seconds: stored as a DynamoDB number (a TTL
// attribute), shown as an RFC 3339 string in JSON.
type Epoch int64

// EpochOf returns t as an Epoch.
func EpochOf(t time.Time) Epoch { return Epoch(t.Unix()) }

// Time returns e as a UTC time.
func (e Epoch) Time() time.Time { return time.Unix(int64(e), 0).UTC() }

// MarshalJSON writes e as an RFC 3339 string.
func (e Epoch) MarshalJSON() ([]byte, error) {
	return json.Marshal(e.Time().Format(time.RFC3339))
}

// UnmarshalJSON reads an RFC 3339 string.
func (e *Epoch) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return err
	}
	*e = EpochOf(t)
	return nil
}
