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
		{"not exists below a missing object", `{"userIdentity":{"type":[{"exists":false}]}}`, userDelete, true},
		{"not exists below a present object", `{"userIdentity":{"type":[{"exists":false}]}}`, ttl, false},
		{"missing object", `{"userIdentity":{"type":["Service"]}}`, userDelete, false},
		{"equality list, any", `{"dynamodb":{"NewImage":{"status":{"S":["SHIPPED","PLACED"]}}}}`, insert, true},
		{"number literal never equals a string", `{"dynamodb":{"NewImage":{"n":{"N":[5]}}}}`, ttl, false},
		{"every key must match", `{"eventName":["REMOVE"],"dynamodb":{"NewImage":{"status":{"S":["SHIPPED"]}}}}`, ttl, false},
		{"suffix", `{"dynamodb":{"NewImage":{"status":{"S":[{"suffix":"CED"}]}}}}`, insert, true},
		{"equals-ignore-case", `{"eventName":[{"equals-ignore-case":"insert"}]}`, insert, true},
		{"anything-but a single value", `{"eventName":[{"anything-but":"INSERT"}]}`, insert, false},
		{"anything-but a prefix", `{"eventName":[{"anything-but":{"prefix":"IN"}}]}`, userDelete, true},
		{"anything-but a prefix, no", `{"eventName":[{"anything-but":{"prefix":"IN"}}]}`, insert, false},
		{"anything-but, absent field", `{"userIdentity":{"type":[{"anything-but":["User"]}]}}`, userDelete, false},
		{"numeric out of range", `{"dynamodb":{"NewImage":{"n":{"N":[{"numeric":[">",5]}]}}}}`, ttl, false},
		{"value or operator", `{"eventName":["MODIFY",{"prefix":"INS"}]}`, insert, true},
		// Exists tests leaves ("Using the Exists operator", Lambda's DynamoDB
		// filtering guide): without the type level, an attribute's value is
		// its type object, no leaf. AWS delivered the first for an item that
		// has the attribute (recorded against AWS, 2025).
		{"not exists on an attribute's type object", `{"dynamodb":{"NewImage":{"status":[{"exists":false}]}}}`, insert, true},
		{"exists on an attribute's type object", `{"dynamodb":{"NewImage":{"status":[{"exists":true}]}}}`, insert, false},
		{"exists on an attribute's value", `{"dynamodb":{"NewImage":{"status":{"S":[{"exists":true}]}}}}`, insert, true},
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

func TestInvalidPatternsAreRejected(t *testing.T) {
	tests := []struct{ name, pattern string }{
		{"not json", `{"eventName":`},
		{"bare value", `{"eventName":"INSERT"}`},
		{"unknown operator", `{"eventName":[{"contains":"IN"}]}`},
		{"two operators in one object", `{"eventName":[{"prefix":"I","suffix":"T"}]}`},
		{"empty object", `{"dynamodb":{}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := parsePattern(tt.pattern); err == nil {
				t.Errorf("got no error, want one")
			}
		})
	}
	for _, m := range wiring.Mappings() {
		for _, f := range m.Filters {
			if _, err := parsePattern(f); err != nil {
				t.Errorf("wiring %s: %v", m.Name, err)
			}
		}
	}
}
