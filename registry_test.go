package postbox

import (
	"errors"
	"strings"
	"testing"
)

type shipment struct {
	ID    string `json:"id"`
	Items int    `json:"items"`
}

func (s shipment) Validate() error {
	if s.Items < 1 {
		return errors.New("a shipment has at least one item")
	}
	return nil
}

func TestRegistryCheck(t *testing.T) {
	reg, err := NewRegistry(
		EventType{Type: "shipment.sent", Topic: "shipping", KeyRequired: true, Payload: JSON[shipment]()},
		EventType{Type: "audit.note", Topic: "audit"},
	)
	if err != nil {
		t.Fatal(err)
	}
	ok := []Message{
		{Topic: "shipping", Key: "s1", Type: "shipment.sent", Payload: []byte(`{"id":"s1","items":2}`)},
		{Topic: "audit", Type: "audit.note", Payload: []byte(`anything at all`)},
	}
	for _, m := range ok {
		if err := reg.Check(m); err != nil {
			t.Errorf("Check(%s) = %v", m.Type, err)
		}
	}
	bad := map[string]Message{
		`"shipment.lost" is not in the registry (known types: audit.note, shipment.sent)`: {Topic: "shipping", Key: "s", Type: "shipment.lost"},
		`belongs on topic "shipping", not "audit"`:                                        {Topic: "audit", Key: "s", Type: "shipment.sent", Payload: []byte(`{"id":"s1","items":2}`)},
		`requires a key`:                       {Topic: "shipping", Type: "shipment.sent", Payload: []byte(`{"id":"s1","items":2}`)},
		`unknown field "weight"`:               {Topic: "shipping", Key: "s", Type: "shipment.sent", Payload: []byte(`{"id":"s1","items":2,"weight":3}`)},
		`cannot unmarshal string`:              {Topic: "shipping", Key: "s", Type: "shipment.sent", Payload: []byte(`{"id":"s1","items":"2"}`)},
		`at least one item`:                    {Topic: "shipping", Key: "s", Type: "shipment.sent", Payload: []byte(`{"id":"s1","items":0}`)},
		`payload is empty`:                     {Topic: "shipping", Key: "s", Type: "shipment.sent"},
		`data after the JSON postbox.shipment`: {Topic: "shipping", Key: "s", Type: "shipment.sent", Payload: []byte(`{"id":"s1","items":1}{}`)},
		`payload is not a valid postbox.shipment: unexpected EOF`: {Topic: "shipping", Key: "s", Type: "shipment.sent", Payload: []byte(`{`)},
	}
	for want, m := range bad {
		err := reg.Check(m)
		if !errors.Is(err, ErrInvalidMessage) || !strings.Contains(err.Error(), want) {
			t.Errorf("Check = %v; want ErrInvalidMessage containing %q", err, want)
		}
	}
	if got := reg.Types(); len(got) != 2 || got[0].Type != "audit.note" {
		t.Errorf("Types() = %+v", got)
	}
}

func TestRegistryRegisterRefusesBadTypes(t *testing.T) {
	reg := &Registry{}
	if err := reg.Register(EventType{Type: "a", Topic: "t"}); err != nil {
		t.Fatal(err)
	}
	for want, et := range map[string]EventType{
		"registered twice":               {Type: "a", Topic: "t"},
		"event type is empty":            {Topic: "t"},
		"topic of event type b is empty": {Type: "b"},
	} {
		if err := reg.Register(et); !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), want) {
			t.Errorf("Register(%+v) = %v; want ErrInvalidConfig containing %q", et, err, want)
		}
	}
}
