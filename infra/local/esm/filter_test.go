package esm

import (
	"encoding/json"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/shopstream/shopstream/shared/wiring"
)

func doc(t *testing.T, r events.DynamoDBEventRecord) map[string]any {
	t.Helper()
	raw, _ := json.Marshal(r)
	var m map[string]any
	json.Unmarshal(raw, &m)
	return m
}

func TestFilterPatterns(t *testing.T) {
	ttl := events.DynamoDBEventRecord{EventName: "REMOVE", UserIdentity: &events.DynamoDBUserIdentity{Type: "Service", PrincipalID: "dynamodb.amazonaws.com"},
		Change: events.DynamoDBStreamRecord{NewImage: map[string]events.DynamoDBAttributeValue{"status": events.NewStringAttribute("PLACED"), "n": events.NewNumberAttribute("5")}}}
	userDelete := events.DynamoDBEventRecord{EventName: "REMOVE"}
	insert := events.DynamoDBEventRecord{EventName: "INSERT", Change: events.DynamoDBStreamRecord{NewImage: map[string]events.DynamoDBAttributeValue{"status": events.NewStringAttribute("PLACED")}}}
	tests := []struct {
		name    string
		pattern string
		rec     events.DynamoDBEventRecord
		want    bool
	}{
		{"ttl filter, ttl removal", wiring.TTLRemovalFilter, ttl, true},
		{"ttl filter, user delete", wiring.TTLRemovalFilter, userDelete, false},
		{"ttl filter, insert", wiring.TTLRemovalFilter, insert, false},
		{"event names", `{"eventName":["INSERT","MODIFY"]}`, insert, true},
		{"event names, remove", `{"eventName":["INSERT","MODIFY"]}`, userDelete, false},
		{"nested image value", `{"dynamodb":{"NewImage":{"status":{"S":["PLACED"]}}}}`, insert, true},
		{"prefix", `{"dynamodb":{"NewImage":{"status":{"S":[{"prefix":"PLA"}]}}}}`, insert, true},
		{"prefix, no", `{"dynamodb":{"NewImage":{"status":{"S":[{"prefix":"SHI"}]}}}}`, insert, false},
		{"anything-but", `{"eventName":[{"anything-but":["REMOVE"]}]}`, insert, true},
		{"anything-but, no", `{"eventName":[{"anything-but":["REMOVE"]}]}`, userDelete, false},
		{"exists", `{"userIdentity":{"type":[{"exists":true}]}}`, ttl, true},
		{"exists, absent", `{"userIdentity":{"type":[{"exists":true}]}}`, userDelete, false},
		{"not exists", `{"userIdentity":[{"exists":false}]}`, userDelete, true},
		{"numeric on a number string", `{"dynamodb":{"NewImage":{"n":{"N":[{"numeric":[">",3,"<=",5]}]}}}}`, ttl, true},
		{"case matters", `{"userIdentity":{"type":["service"]}}`, ttl, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := parsePattern(tt.pattern)
			if err != nil {
				t.Fatal(err)
			}
			if got := p.match(doc(t, tt.rec)); got != tt.want {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}
