package cli

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"github.com/postbox-go/postbox/broker/debezium"
)

// kafkaDebezium returns the router options of a kafka:// URL's debezium parameter: "defaults" for the Outbox
// Event Router's defaults, or the path of a Debezium connector's configuration, in Kafka Connect's JSON (the
// body POSTed to /connectors, {"name":…,"config":{…}}, or the config object alone) or as a .properties file.
// The EventRouter transform's settings and the converters are read from it; the rest (database.*, slot.name…)
// is the connector's and is left alone.
func kafkaDebezium(v string) (*debezium.Options, error) {
	if v == "defaults" {
		return &debezium.Options{}, nil
	}
	b, err := os.ReadFile(v)
	if err != nil {
		return nil, fmt.Errorf("debezium=%s: %v; give the path of the connector's configuration (JSON or .properties), or debezium=defaults", v, err)
	}
	props, err := connectorProperties(b)
	if err != nil {
		return nil, fmt.Errorf("debezium=%s: %v", v, err)
	}
	o, _, err := debezium.ParseProperties(props)
	if err != nil {
		return nil, fmt.Errorf("debezium=%s: %v", v, err)
	}
	return &o, nil
}

// connectorProperties reads a connector configuration as JSON when it starts with '{', otherwise as Java
// properties (key=value or key: value lines, # and ! comments).
func connectorProperties(b []byte) (map[string]string, error) {
	if t := bytes.TrimSpace(b); len(t) > 0 && t[0] == '{' {
		var doc map[string]any
		if err := json.Unmarshal(t, &doc); err != nil {
			return nil, fmt.Errorf("not JSON: %v", err)
		}
		if cfg, ok := doc["config"].(map[string]any); ok {
			doc = cfg
		}
		props := make(map[string]string, len(doc))
		for k, v := range doc {
			switch x := v.(type) {
			case string:
				props[k] = x
			case bool, float64:
				props[k] = fmt.Sprint(x)
			}
		}
		return props, nil
	}
	props := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' || line[0] == '!' {
			continue
		}
		i := strings.IndexAny(line, "=:")
		if i < 0 {
			return nil, fmt.Errorf("line %d: %q is not key=value", n, line)
		}
		props[strings.TrimSpace(line[:i])] = strings.TrimSpace(line[i+1:])
	}
	return props, sc.Err()
}
